// An HTTP/1.1 GET written by hand over any duplex: the node suites and the cluster-proxy suite's hub client.
import type { Duplex } from 'node:stream';

/**
 * One HTTP/1.1 GET over `conn` (a tunnelled connection, or TLS over one), written by hand: node:http
 * wants a net.Socket. `Connection: close`, so the response ends with the stream.
 */
export function httpGet(
  conn: Duplex,
  host: string,
  path: string,
  timeoutMs = 10_000,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      conn.destroy();
      reject(new Error(`no complete answer from ${host}${path} within ${timeoutMs} ms`));
    }, timeoutMs);
    conn.on('data', (c: Buffer) => chunks.push(c));
    conn.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    conn.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const head = text.slice(0, split);
      let body = split < 0 ? '' : text.slice(split + 4);
      if (/^transfer-encoding:\s*chunked/im.test(head)) {
        let out = '';
        for (let at = 0; ; ) {
          const eol = body.indexOf('\r\n', at);
          const size = parseInt(body.slice(at, eol), 16);
          if (!(size > 0)) break;
          out += body.slice(eol + 2, eol + 2 + size);
          at = eol + 2 + size + 2;
        }
        body = out;
      }
      resolve({ status: Number(/^HTTP\/1\.[01] (\d+)/.exec(head)?.[1] ?? 0), body });
    });
    conn.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
}
