// Dial targets for tests: real TCP and HTTP servers on loopback.
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { joinHostPort } from '../../net/address.js';

export interface Target {
  host: string;
  port: number;
  address: string;
  /** Connections accepted so far. */
  accepted: () => number;
  /** Resolves once `count` connections have been accepted: a client's connect can complete before the server sees it. */
  whenAccepted: (count: number) => Promise<void>;
  close: () => Promise<void>;
}

function wrap(server: net.Server, host: string, port = 0): Promise<Target> {
  let accepted = 0;
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  server.on('connection', () => {
    accepted++;
    for (const w of waiters.filter((w) => w.count <= accepted)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port } = server.address() as net.AddressInfo;
      resolve({
        host,
        port,
        address: joinHostPort(host, port),
        accepted: () => accepted,
        whenAccepted: (count) =>
          count <= accepted ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve })),
        close: () =>
          new Promise((r) => {
            if ('closeAllConnections' in server) (server as http.Server).closeAllConnections();
            server.close(() => r());
          }),
      });
    });
  });
}

/** Echoes every byte back, on `port` (0: any). Sockets are tracked so close() does not wait for clients. */
export function startEchoServer(host = '127.0.0.1', port = 0): Promise<Target> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  return wrap(server, host, port).then((t) => ({
    ...t,
    close: () => {
      for (const s of sockets) s.destroy();
      return t.close();
    },
  }));
}

/**
 * HTTP server: GET /bytes/N answers N deterministic bytes; POST /sha256 answers the digest of the
 * body; anything else answers "hello from <path>".
 */
export function startHttpServer(host = '127.0.0.1'): Promise<Target> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const bytes = /^\/bytes\/(\d+)$/.exec(url.pathname);
    if (bytes) {
      const body = pattern(Number(bytes[1]));
      res.writeHead(200, { 'content-length': body.length, 'x-sha256': sha256(body) }).end(body);
      return;
    }
    if (url.pathname === '/sha256' && req.method === 'POST') {
      const hash = createHash('sha256');
      req.on('data', (c: Buffer) => hash.update(c));
      req.on('end', () => res.writeHead(200).end(hash.digest('hex')));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello from ${url.pathname}`);
  });
  return wrap(server, host);
}

/** Deterministic, incompressible-looking bytes. */
export function pattern(size: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * A free loopback port (bound, then released): to dial for a refusal, or for a server to bind later,
 * often in another process. Picked at random in 20000-32767, below Linux's default ephemeral range
 * (32768-60999): a port from a bind to 0 lies inside that range, where an outgoing connection of a
 * busy test or benchmark (hundreds of connects a second) can take it before the server binds it, and
 * where the Go proxy-server refuses to listen (above 49151).
 */
export async function unusedPort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12768);
    const free = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** Writes `payload` to a connection to an echo target, reads as many bytes back, returns their checksum. */
/** Sends `request` on a tunnel and resolves with everything that comes back until it closes (an HTTP/1.0 exchange). */
export function requestUntilClose(conn: Duplex, request: string): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    conn.on('data', (c: Buffer) => (text += c.toString()));
    conn.on('close', () => resolve(text));
    conn.write(request);
  });
}

export function echoRoundTrip(conn: Duplex, payload: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    conn.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= payload.length) resolve(sha256(Buffer.concat(chunks)));
    });
    conn.on('error', reject);
    conn.write(payload);
  });
}

/**
 * `clients` loops each running `attempt` until stopped: a steady dial load. `succeeded(n)` resolves once
 * `n` attempts in all have succeeded (a test paces its edits by the load, not by the clock), and
 * rejects at the first failure; `stop`
 * resolves with the count and the errors.
 */
export function dialLoad(
  clients: number,
  attempt: () => Promise<void>,
): { succeeded(n: number): Promise<void>; stop(): Promise<{ ok: number; failures: string[] }> } {
  let running = true;
  let ok = 0;
  const failures: string[] = [];
  const waiters = new Set<{ n: number; resolve: () => void; reject: (err: Error) => void }>();
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      try {
        await attempt();
        ok++;
        for (const w of waiters)
          if (ok >= w.n) {
            waiters.delete(w);
            w.resolve();
          }
      } catch (err) {
        failures.push((err as Error).message);
        for (const w of waiters) w.reject(new Error(`a dial of the load failed: ${(err as Error).message}`));
        waiters.clear();
      }
    }
  });
  return {
    succeeded: (n) =>
      new Promise((resolve, reject) => {
        if (ok >= n) return resolve();
        if (!running) return reject(new Error(`the load stopped after ${ok} dials, before ${n}`));
        waiters.add({ n, resolve, reject });
      }),
    stop: async () => {
      running = false;
      await Promise.all(loops);
      return { ok, failures };
    },
  };
}
