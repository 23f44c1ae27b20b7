// A target that accepts connections and holds them, sending nothing, in a process of its own: the
// open-files limit here is 20000, and 10k idle tunnelled connections already hold 10k client sockets
// in the bench. Prints its port as one line; exits on SIGTERM.
import net from 'node:net';

const server = net.createServer((s) => s.on('error', () => {}));
// 10k connections arrive in a burst: a big accept backlog avoids 1 s SYN retries.
server.listen(0, '127.0.0.1', 4096, () => process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`));
process.once('SIGTERM', () => process.exit(0));
