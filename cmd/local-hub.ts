// `npm start` with no --proxy-server-host: a proxy-server on loopback in the same process, so a new
// user sees a tunnelled request within a minute. The agent port uses mTLS with a throwaway PKI
// (written to a temporary folder, since the agent reads its credentials from files); the frontends
// are plaintext on 127.0.0.1 so curl and `spoke-agent dial` need no certificates.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEphemeralPki } from '../hub/ephemeral-pki.js';
import { ProxyHub } from '../hub/proxy-server.js';
import type { Logger } from '../observability/log.js';

export interface LocalHub {
  agentTarget: string;
  agentCredentials: { caCert: string; agentCert: string; agentKey: string };
  close(): Promise<void>;
}

/** `demoTarget` is an address worth dialling in the printed example (the agent's health port). */
export async function startLocalHub(log: Logger, demoTarget: string): Promise<LocalHub> {
  const pki = createEphemeralPki('spoke-agent local hub CA');
  const dir = mkdtempSync(join(tmpdir(), 'spoke-agent-hub-'));
  const file = (name: string, pem: string) => {
    const path = join(dir, name);
    writeFileSync(path, pem, { mode: 0o600 });
    return path;
  };
  const agentCredentials = { caCert: file('ca.crt', pki.ca.cert), agentCert: file('agent.crt', pki.client.cert), agentKey: file('agent.key', pki.client.key) };
  const hub = await ProxyHub.start({
    host: '127.0.0.1',
    agentPort: 0,
    serverPort: 0,
    httpConnectPort: 0,
    proxyStrategies: ['destHost', 'default'],
    agentTls: { cert: pki.server.cert, key: pki.server.key, ca: pki.ca.cert },
    log: log.child({ component: 'local-hub' }),
  });
  const { agent, server, httpConnect } = hub.ports;
  log.info({ agentPort: agent, grpcFrontendPort: server, httpConnectPort: httpConnect }, 'no --proxy-server-host given: started a local hub on 127.0.0.1');
  process.stderr.write(
    [
      '',
      `Local hub on 127.0.0.1 (agent port ${agent}, gRPC frontend ${server}, HTTP CONNECT ${httpConnect}).`,
      'Once the agent is ready, dial through the tunnel, for example to the agent\'s own health port:',
      `  curl -p -x http://127.0.0.1:${httpConnect} http://${demoTarget}/readyz`,
      `  npm start -- dial --proxy-port=${server} ${demoTarget}`,
      '',
    ].join('\n'),
  );
  return {
    agentTarget: `localhost:${agent}`,
    agentCredentials,
    close: async () => {
      await hub.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
