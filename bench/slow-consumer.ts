// A healthy upload (client -> target) on one tunnelled connection, alone and then while a second
// connection on the same agent stream uploads to a target that stopped reading. Our agent buffers
// that target up to --max-connection-buffer, pauses the stream for at most the stall limit, then
// closes it (agent/endpoint-connection.ts); the Go agent blocks the whole stream behind it (ANP #180).
// Baseline: the same connection alone, same subject, same run. Agent RSS is sampled throughout.
import type { Duplex } from 'node:stream';
import type { Targets } from './env.js';
import { MiB, type Report } from './report.js';
import type { Subjects } from './subjects.js';

const chunk = Buffer.alloc(64 * 1024, 0x62);

/** Writes as fast as the connection takes until stopped; resolves when it closes or is stopped. */
function pump(conn: Duplex): { stop: () => void; closedAt: () => number | undefined } {
  let stopped = false;
  let closedAt: number | undefined;
  conn.once('close', () => (closedAt ??= performance.now()));
  conn.on('error', () => {});
  const go = () => {
    while (!stopped && !conn.destroyed) if (!conn.write(chunk)) return conn.once('drain', go);
  };
  go();
  return {
    stop: () => {
      stopped = true;
      conn.destroy();
    },
    closedAt: () => (stopped ? undefined : closedAt),
  };
}

export async function runSlowConsumer(
  report: Report,
  subjects: Subjects,
  targets: Targets,
  quick: boolean,
): Promise<void> {
  const section = 'Slow consumer';
  const windowMs = quick ? 3000 : 6000;
  for (const subject of subjects.list(['http-connect'])) {
    if (subject.role === 'direct') continue;
    await subject.use(async (s) => {
      const agent = s.agent!;
      let rssMax = 0;
      const sampler = setInterval(() => (rssMax = Math.max(rssMax, agent.proc.rss())), 100);
      const measure = async () => {
        const before = targets.sinkBytes();
        const t = performance.now();
        await new Promise((r) => setTimeout(r, windowMs));
        return (targets.sinkBytes() - before) / MiB / ((performance.now() - t) / 1000);
      };
      const healthy = pump(await s.route.dial(targets.sink));
      try {
        await new Promise((r) => setTimeout(r, 500)); // warm-up
        const alone = await measure();
        const rssAlone = rssMax;
        rssMax = 0;
        const stalled = await s.route.dial(targets.stall);
        const slowStart = performance.now();
        const slow = pump(stalled);
        const withSlow = await measure();
        const at = slow.closedAt();
        const closedAfter = at === undefined ? undefined : (at - slowStart) / 1000;
        slow.stop();
        report.add({
          section,
          metric: 'healthy upload while another target stops reading',
          subject: s.name,
          value: withSlow,
          unit: 'MiB/s',
          baseline: { subject: 'same connection alone', value: alone },
          note:
            closedAfter === undefined
              ? `stalled connection still open after ${windowMs / 1000} s`
              : `stalled connection closed after ${closedAfter.toFixed(1)} s`,
        });
        report.add({
          section,
          metric: 'agent peak RSS with the stalled target',
          subject: s.name,
          value: rssMax / MiB,
          unit: 'MiB',
          baseline: { subject: 'peak RSS, healthy connection alone', value: rssAlone / MiB },
        });
      } finally {
        clearInterval(sampler);
        healthy.stop();
      }
    });
  }
}
