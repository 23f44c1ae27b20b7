// The burst section's target, in a process of its own (so its CPU is not the client's): each
// connection sends a 16-byte header, the bytes wanted and an offset, and gets that many bytes of a
// fixed pseudo-random block starting at the offset, then a FIN. Like nginx, it gives up on a reader
// that has taken nothing for --send-timeout ms (nginx's send_timeout, 60 s by default) and closes the
// connection the same way it ends a whole one, so a starved connection shows as a short stream.
// It also keeps, per connection, the longest time a write waited for the reader: how long the agent
// left this target unread. Prints its port as one line; answers `stats` and `reset` lines on stdin
// with one JSON line; exits on SIGTERM.
import net from 'node:net';
import { createInterface } from 'node:readline';
import { burstBlock, burstBlockLength } from './burst-content.js';

const sendTimeoutMs = Number(/^--send-timeout=(\d+)$/.exec(process.argv[2] ?? '')?.[1] ?? 60_000);
const chunk = 64 << 10;

let longestWaitMs = 0;
let timeouts = 0;

const server = net.createServer({ noDelay: true }, (s) => {
  s.on('error', () => {});
  s.once('readable', function ask() {
    const head = s.read(16) as Buffer | null;
    if (!head) return s.once('readable', ask);
    let left = Number(head.readBigUInt64BE(0));
    let at = Number(head.readBigUInt64BE(8)) % burstBlockLength;
    let cancelTimeout = () => {};
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk);
        const piece = burstBlock.subarray(at, at + n);
        left -= n;
        at = (at + n) % burstBlockLength;
        if (!s.write(piece)) {
          const waitFrom = performance.now();
          const timer = setTimeout(() => {
            timeouts++;
            s.end(); // nginx closes a timed-out response with a FIN, as it ends a whole one
          }, sendTimeoutMs);
          cancelTimeout = () => clearTimeout(timer);
          s.once('drain', () => {
            clearTimeout(timer);
            longestWaitMs = Math.max(longestWaitMs, performance.now() - waitFrom);
            pump();
          });
          return;
        }
      }
      s.end();
    };
    s.once('close', () => cancelTimeout());
    pump();
  });
});
server.listen(0, '127.0.0.1', 4096, () => process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`));

createInterface({ input: process.stdin }).on('line', (line) => {
  process.stdout.write(`${JSON.stringify({ longestWaitMs, timeouts })}\n`);
  if (line === 'reset') {
    longestWaitMs = 0;
    timeouts = 0;
  }
});
process.once('SIGTERM', () => process.exit(0));
