// Requests to the spoke's API server: JSON in and out, and watches as newline-delimited JSON events,
// over Node's own http/https. client-node's KubeConfig says where the server is and how to reach it
// (TLS, client certificates, tokens re-read as they rotate, exec plugins, proxies:
// applyToHTTPSOptions); its generated API classes and its fetch-based Watch are not used: they load
// undici (a WebAssembly HTTP parser) and every generated model, which an
// agent on every node paid for two GETs and a watch (bench/README.md, "Idle footprint").
import type { IncomingMessage, RequestOptions } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';

// Not `import http from 'node:http'`: an ES module import of node:http reads every export, and its lazy
// WebSocket getters load Node's bundled undici (observability/health-server.ts).
const http = process.getBuiltinModule('node:http');
const https = process.getBuiltinModule('node:https');

/** A Kubernetes `Status` object, as the API server sends with an error. */
export interface ApiStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
}

/** A refusal or failure the API server answered with: its HTTP status and, when it sent one, its Status. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly status?: ApiStatus,
  ) {
    super(
      `${statusCode} ${status?.reason ?? http.STATUS_CODES[statusCode] ?? 'error'}${status?.message ? `: ${status.message}` : ''}`,
    );
  }
}

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export type QueryParams = Record<string, string | undefined>;

/** The longest line a watch may send (one object): past it the watch fails rather than buffer without end. */
const maxEventBytes = 16 << 20;

export class KubeApiClient {
  /** Kept-alive connections, for a kubeconfig without a proxy: a TLS handshake is most of a review's CPU. */
  private readonly keptAlive = {
    'http:': new http.Agent({ keepAlive: true, maxFreeSockets: 2 }),
    'https:': new https.Agent({ keepAlive: true, maxFreeSockets: 2 }),
  };

  constructor(readonly kubeConfig: KubeConfig) {}

  /** The API server's URL, e.g. https://10.96.0.1:443. */
  get server(): string {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    return cluster.server;
  }

  get<T>(path: string, query?: QueryParams, signal?: AbortSignal): Promise<T> {
    return this.json<T>('GET', path, query, undefined, signal);
  }

  post<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    return this.json<T>('POST', path, undefined, body, signal);
  }

  /**
   * Streams a watch's events to `onEvent` until the server ends it (resolves), or it fails (rejects
   * with the error: an ApiError for a refusal, also one that arrives as an ERROR event, such as 410
   * Gone). `onOpen` hears of the server's acceptance. `signal` ends it early; it then resolves.
   */
  async watch<T>(
    path: string,
    query: QueryParams,
    handlers: { onEvent: (event: WatchEvent<T>) => void; onOpen?: () => void },
    signal: AbortSignal,
  ): Promise<void> {
    const { onEvent } = handlers;
    const res = await this.send('GET', path, { ...query, watch: 'true' }, undefined, signal);
    if (res.statusCode !== 200) throw await errorOf(res);
    handlers.onOpen?.();
    await new Promise<void>((resolve, reject) => {
      let pending = '';
      let failed = false;
      const fail = (err: Error) => {
        failed = true;
        res.destroy();
        reject(err);
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        while (!failed) {
          const nl = pending.indexOf('\n');
          if (nl < 0) break;
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (line.trim() === '') continue;
          let event: WatchEvent<T>;
          try {
            event = JSON.parse(line) as WatchEvent<T>;
          } catch {
            return fail(new Error(`watch ${path}: the API server sent a line that is not JSON (${line.length} bytes)`));
          }
          if (event.type === 'ERROR') {
            const status = event.object as ApiStatus;
            return fail(new ApiError(status.code ?? 500, status));
          }
          onEvent(event);
        }
        if (pending.length > maxEventBytes) fail(new Error(`watch ${path}: an event over ${maxEventBytes} bytes`));
      });
      res.on('end', () => failed || resolve());
      // An abort from `signal` is the caller's own stop: not an error.
      res.on('error', (err) => failed || (signal.aborted ? resolve() : reject(err)));
      res.on('close', () => failed || resolve());
    });
  }

  private async json<T>(
    method: string,
    path: string,
    query: QueryParams | undefined,
    body: unknown,
    signal?: AbortSignal,
  ): Promise<T> {
    const res = await this.send(method, path, query, body, signal);
    if (res.statusCode === undefined || res.statusCode < 200 || res.statusCode > 299) throw await errorOf(res);
    return JSON.parse(await text(res)) as T;
  }

  private async send(
    method: string,
    path: string,
    query: QueryParams | undefined,
    body: unknown,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const url = new URL(this.server.replace(/\/$/, '') + path);
    for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined) url.searchParams.set(key, value);
    const opts: RequestOptions & { headers: Record<string, string> } = {
      method,
      headers: { accept: 'application/json' },
      signal,
      timeout: 30_000,
    };
    // CA, client certificate, bearer token (re-read when its file rotates) and the agent (a proxy's, if the kubeconfig names one).
    await this.kubeConfig.applyToHTTPSOptions(opts);
    // client-node's agent for a plain connection closes it after each request (its proxies' agents
    // stay); the TLS options are the request's, so ours pools by them.
    if (opts.agent?.constructor === http.Agent || opts.agent?.constructor === https.Agent)
      opts.agent = this.keptAlive[url.protocol === 'http:' ? 'http:' : 'https:'];
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) opts.headers['content-type'] = 'application/json';
    const transport = url.protocol === 'http:' ? http : https;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = transport.request(url, opts, resolve);
      req.on('error', reject);
      // No bytes for 30 s before the response starts: the server is not answering. A watch that is
      // quiet for longer is fine once it has started (the socket timeout is lifted then).
      req.on('timeout', () =>
        req.destroy(new Error(`${method} ${url.pathname}: no answer from the API server within 30 s`)),
      );
      req.on('response', (res) => res.socket.setTimeout(0));
      req.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
      req.end(payload);
    });
  }
}

function text(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (body += chunk));
    res.on('end', () => resolve(body));
    res.on('error', reject);
  });
}

async function errorOf(res: IncomingMessage): Promise<ApiError> {
  const body = await text(res).catch(() => '');
  let status: ApiStatus | undefined;
  try {
    const parsed = JSON.parse(body) as ApiStatus;
    if (parsed?.kind === 'Status') status = parsed;
  } catch {
    // Not JSON (a proxy's or load balancer's page): the status code says enough.
  }
  return new ApiError(res.statusCode ?? 500, status);
}
