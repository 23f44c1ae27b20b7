// The local hub in a process of its own, so its CPU does not compete with the bench's clients and
// targets inside one event loop (the Go proxy-server is a separate process too). Reads its
// configuration as JSON from argv[2], prints its ports as one JSON line, exits on SIGTERM.
import { readFileSync } from 'node:fs';
import { ProxyHub } from '../hub/proxy-server.js';

interface HubProcessConfig {
  caCert: string;
  serverCert: string;
  serverKey: string;
  /** Plaintext frontends (the scale run: 10k TLS handshakes would only measure the bench's client). */
  plainFrontends?: boolean;
}

const cfg = JSON.parse(process.argv[2]!) as HubProcessConfig;
const tls = { cert: readFileSync(cfg.serverCert), key: readFileSync(cfg.serverKey), ca: readFileSync(cfg.caCert) };
const hub = await ProxyHub.start({
  host: '127.0.0.1',
  agentPort: 0,
  serverPort: 0,
  httpConnectPort: 0,
  proxyStrategies: ['default'],
  agentTls: tls,
  frontendTls: cfg.plainFrontends ? undefined : tls,
});
process.stdout.write(`${JSON.stringify(hub.ports)}\n`);
process.once('SIGTERM', () => {
  // process.exit (not a kill) so --cpu-prof can write its profile.
  void hub.close().finally(() => process.exit(0));
});
