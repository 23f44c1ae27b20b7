// No --proxy-server-host: a proxy-server on loopback in the same process, so a new user sees a
// tunnelled request within a minute (with `npm start`'s demo, demo.ts, or alone). The agent port uses
// mTLS with a throwaway PKI (written to a temporary folder, since the agent reads its credentials from
// files); the frontends are plaintext on 127.0.0.1 so curl and `spoke-agent dial` need no certificates.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEphemeralPki } from '../hub/ephemeral-pki.js';
import { ProxyHub } from '../hub/proxy-server.js';
import type { Logger } from '../observability/log.js';

export interface LocalHub {
  agentTarget: string;
  agentCredentials: { caCert: string; agentCert: string; agentKey: string };
  ports: { agent: number; server: number; httpConnect: number };
  /** Prints `lines` to stderr once the agent is connected, so they work when read. */
  announce(agentID: string, lines: string[]): void;
  /**
   * Without the demo: the hub's ports and a dial through the tunnel. Without rules the agent dials
   * anything, so its own health port (`healthTarget`) is the example; with rules it dials only their
   * targets, so the example names one.
   */
  tunnelLines(healthTarget: string | undefined): string[];
  close(): Promise<void>;
}

export async function startLocalHub(log: Logger): Promise<LocalHub> {
  const pki = createEphemeralPki('spoke-agent local hub CA');
  const dir = mkdtempSync(join(tmpdir(), 'spoke-agent-hub-'));
  const file = (name: string, pem: string) => {
    const path = join(dir, name);
    writeFileSync(path, pem, { mode: 0o600 });
    return path;
  };
  const agentCredentials = {
    caCert: file('ca.crt', pki.ca.cert),
    agentCert: file('agent.crt', pki.client.cert),
    agentKey: file('agent.key', pki.client.key),
  };
  const hub = await ProxyHub.start({
    host: '127.0.0.1',
    agentPort: 0,
    serverPort: 0,
    httpConnectPort: 0,
    proxyStrategies: ['destHost', 'default'],
    agentTls: { cert: pki.server.cert, key: pki.server.key, ca: pki.ca.cert },
    log: log.child({ component: 'local-hub' }),
  });
  const [agent, server, httpConnect] = [hub.ports.agent!, hub.ports.server!, hub.ports.httpConnect!]; // all three were asked for
  log.info(
    { agentPort: agent, grpcFrontendPort: server, httpConnectPort: httpConnect },
    'no --proxy-server-host given: started a local hub on 127.0.0.1',
  );
  return {
    agentTarget: `localhost:${agent}`,
    agentCredentials,
    ports: { agent, server, httpConnect },
    announce: (agentID, lines) => {
      const print = (note: string) => process.stderr.write(`\n${note}${lines.join('\n')}\n\n`);
      hub.waitForAgent(agentID, 60_000).then(
        () => print(''),
        () => print('(the agent has not connected to the local hub yet: see the log)\n'),
      );
    },
    tunnelLines: (healthTarget) => {
      const target = healthTarget ?? 'NAME:PORT';
      return [
        `Local hub on 127.0.0.1 (agent port ${agent}, gRPC frontend ${server}, HTTP CONNECT ${httpConnect}). Dial through the tunnel, for example ${healthTarget ? "to the agent's own health port" : 'to a name your rules serve'}:`,
        `  curl -p -x http://127.0.0.1:${httpConnect} http://${target}${healthTarget ? '/readyz' : '/'}`,
        `  npm start -- dial --proxy-port=${server} ${target}`,
      ];
    },
    close: async () => {
      await hub.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
