// Per-connection settings that grpc-js has no option for, applied to the HTTP/2 sessions of a server.
import type http2 from 'node:http2';
import type { Server } from '@grpc/grpc-js';
import type { Logger } from '../observability/log.js';

/**
 * Calls `onSession` for every connection a bound grpc-js server accepts. grpc-js gives no hook for
 * this, so it reads the server's `http2Servers` map, which is private to @grpc/grpc-js (pinned in
 * package.json); if that changes shape, the hook is skipped with a warning rather than failing.
 */
export function onSessions(server: Server, log: Logger, onSession: (session: http2.ServerHttp2Session) => void): void {
  const http2Servers = (server as unknown as { http2Servers?: Map<http2.Http2Server, unknown> }).http2Servers;
  if (!(http2Servers instanceof Map)) {
    log.warn('grpc-js internals changed: keepalive enforcement and window sizes are off');
    return;
  }
  for (const h2 of http2Servers.keys()) h2.on('session', onSession);
}

/** grpc-go grows its flow-control windows with the bandwidth-delay product; Node keeps HTTP/2's 64 KiB. */
export function widenWindows(session: http2.ServerHttp2Session): void {
  session.settings({ initialWindowSize: 1 << 20 });
  session.setLocalWindowSize(8 << 20);
}
