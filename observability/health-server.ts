// The health port: /healthz, /readyz (and the deprecated /ready), /metrics, plus routes that other
// components register (the DNS explainer under /debug). Readiness follows the Go agent
// (cmd/agent/app/server.go): 503 with every check listed when one fails, `ok` or the verbose list
// on success.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { closeServer, listenOn } from './listen.js';
import type { Logger } from './log.js';

export interface ReadinessCheck {
  name: string;
  /** Undefined when healthy, else why not. */
  check(): string | undefined;
}

// Not `import http from 'node:http'`: an ES module import of node:http reads every export to build
// the namespace, and its lazy WebSocket/MessageEvent getters load undici, RSS for nothing.
const { createServer } = process.getBuiltinModule('node:http');

export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => void | Promise<void>;

/** A debug route's answer: `body` as indented JSON. */
export function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body, null, 2)}\n`);
}

/** Decides whether a request may reach a protected route; answers it itself when not. */
export type Guard = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<boolean>;

export interface HealthServerOptions {
  host: string;
  port: number;
  registry: Registry;
  log: Logger;
}

/**
 * A registry for /metrics that starts with the process's own metrics (CPU, memory, event loop, GC).
 * The event-loop delay histogram (nodejs_eventloop_lag_*) samples the loop once a second, not every
 * 10 ms (prom-client's default): a timer 100 times a second was most of an idle agent's CPU and
 * wake-ups (bench/README.md, "Idle CPU").
 */
export function processRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1000 });
  return registry;
}

const ping: ReadinessCheck = { name: 'ping', check: () => undefined };

export class HealthServer {
  private readonly checks: ReadinessCheck[] = [ping];
  private readonly routes = new Map<string, { handler: RouteHandler; guard?: Guard }>();
  private readonly server: http.Server;
  private local?: http.Server;
  private metricsGuard?: Guard;

  constructor(private readonly opts: HealthServerOptions) {
    this.server = createServer(this.listener(false));
  }

  /** `local`: a request over the local socket, which no guard stops. */
  private listener(local: boolean): http.RequestListener {
    return (req, res) => {
      this.handle(req, res, local).catch((err: unknown) => {
        this.opts.log.error({ err, url: req.url }, 'health server handler failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error\n');
      });
    };
  }

  addCheck(check: ReadinessCheck): void {
    this.checks.push(check);
  }

  /** Serves `path` (exact match) with `handler`; `guard` protects it (e.g. delegated auth). */
  addRoute(path: string, handler: RouteHandler, guard?: Guard): void {
    this.routes.set(path, { handler, guard });
  }

  protectMetrics(guard: Guard): void {
    this.metricsGuard = guard;
  }

  readiness(verbose: boolean): { status: number; body: string } {
    let out = '';
    let failed = false;
    for (const c of this.checks) {
      const problem = c.check();
      if (problem === undefined) out += `[+]${c.name} ok\n`;
      else {
        out += `[-]${c.name} failed: ${problem}\n`;
        failed = true;
      }
    }
    if (failed) return { status: 503, body: out };
    return verbose ? { status: 200, body: `${out}check passed\n` } : { status: 200, body: 'ok' };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse, local: boolean): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://health');
    switch (url.pathname) {
      case '/healthz':
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('ok');
        return;
      case '/ready':
      case '/readyz': {
        const { status, body } = this.readiness(url.searchParams.has('verbose'));
        if (status !== 200) this.opts.log.info({ readiness: body }, 'readiness check failed');
        res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
        return;
      }
      case '/metrics': {
        if (this.metricsGuard && !local && !(await this.metricsGuard(req, res))) return;
        const body = await this.opts.registry.metrics();
        res.writeHead(200, { 'content-type': this.opts.registry.contentType }).end(body);
        return;
      }
    }
    const route = this.routes.get(url.pathname);
    if (!route) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found\n');
      return;
    }
    if (route.guard && !local && !(await route.guard(req, res))) return;
    await route.handler(req, res, url);
  }

  /** On the options' port, or `port` (0: any free one). */
  listen(port = this.opts.port): Promise<AddressInfo> {
    return listenOn(this.server, port, this.opts.host);
  }

  /** Also serves every route on the Unix socket `path` (./local-socket.ts), with no guard. */
  async listenLocal(path: string): Promise<void> {
    const server = createServer(this.listener(true));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.local = server;
  }

  async close(): Promise<void> {
    await Promise.all([closeServer(this.server), this.local && closeServer(this.local)]);
  }
}
