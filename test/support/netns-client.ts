// The harness's way into its network namespace: TCP through netns-gateway.cjs's Unix socket. On it, a
// hub client as cluster-proxy's users are: mTLS to the proxy-server's http-connect frontend, CONNECT
// to a target in the cluster, then HTTP over the tunnel; and plain HTTP to a health port.
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';

/** A socket to `address` (HOST:PORT) inside the namespace whose gateway listens on `gateway`. */
export function gatewaySocket(gateway: string, address: string): net.Socket {
  const s = net.connect(gateway);
  s.write(`${address}\n`);
  return s;
}

/** GET `path` on `address` inside the namespace: its status and body, or undefined when it fails or takes over `timeoutMs`. */
function get(
  gateway: string,
  address: string,
  path: string,
  timeoutMs: number,
): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const req = http.get(
      { createConnection: () => gatewaySocket(gateway, address), path, timeout: timeoutMs },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

/** GET `path` on `address` inside the namespace: the status code, or 0 when it fails or takes over `timeoutMs`. */
export async function statusOf(gateway: string, address: string, path: string, timeoutMs = 5000): Promise<number> {
  return (await get(gateway, address, path, timeoutMs))?.status ?? 0;
}

/** GET `path` on `address` inside the namespace: the body of a 200, or undefined. */
export async function textOf(gateway: string, address: string, path: string): Promise<string | undefined> {
  const got = await get(gateway, address, path, 5000);
  return got?.status === 200 ? got.body : undefined;
}

export interface HubClientOptions {
  gateway: string;
  /** The proxy-server's http-connect frontend inside the namespace, HOST:PORT. */
  frontend: string;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export interface Fetch {
  /** performance.now() at its start and end. */
  start: number;
  end: number;
  ok: boolean;
  bytes: number;
  error?: string;
}

/**
 * GET http://`target``path` through the hub, reading (and counting, not keeping) the body; gives up
 * after `timeoutMs`. `onBytes` sees the running count (a download's progress). `signal` aborts it.
 */
export function fetchThroughHub(
  o: HubClientOptions,
  target: string,
  path: string,
  opts: { timeoutMs: number; onBytes?: (n: number) => void; signal?: AbortSignal },
): Promise<Fetch> {
  const start = performance.now();
  return new Promise((resolve) => {
    let bytes = 0;
    let settled = false;
    const sockets: net.Socket[] = [];
    const finish = (ok: boolean, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      for (const s of sockets) s.destroy();
      resolve({ start, end: performance.now(), ok, bytes, error });
    };
    const timer = setTimeout(() => finish(false, `no answer within ${opts.timeoutMs} ms`), opts.timeoutMs);
    opts.signal?.addEventListener('abort', () => finish(false, 'aborted'));
    const raw = gatewaySocket(o.gateway, o.frontend);
    const secure = tls.connect({ socket: raw, ca: o.ca, cert: o.cert, key: o.key, servername: 'localhost' });
    sockets.push(raw, secure);
    secure.on('error', (e) => finish(false, e.message));
    const connect = http.request({
      createConnection: () => secure,
      method: 'CONNECT',
      path: target,
      headers: { host: target },
    });
    connect.on('error', (e) => finish(false, e.message));
    connect.on('connect', (res, tunnel) => {
      if (res.statusCode !== 200) return finish(false, `CONNECT ${res.statusCode}`);
      const get = http.get(
        { createConnection: () => tunnel, path, headers: { host: target, connection: 'close' } },
        (r) => {
          r.on('data', (c: Buffer) => {
            bytes += c.length;
            opts.onBytes?.(bytes);
          });
          r.on('end', () => finish(r.statusCode === 200, r.statusCode === 200 ? undefined : `GET ${r.statusCode}`));
          r.on('error', (e) => finish(false, e.message));
        },
      );
      get.on('error', (e) => finish(false, e.message));
    });
    connect.end();
  });
}
