// What an operator reads when the TLS to the proxy-server is wrong, from the real agent process:
// no Node deprecation warning for an IP --proxy-server-host, and each misconfiguration named by
// certificate and flag instead of Node's "unable to verify the first certificate".
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ProxyHub } from '../hub/proxy-server.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { runCli, type Child } from './support/processes.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const pki = makePki();

async function hub(agentTls = hubTls(pki)): Promise<ProxyHub> {
  const h = await ProxyHub.start({ agentPort: 0, serverPort: null, agentTls });
  cleanups.push(() => h.close());
  return h;
}

function agent(host: string, port: number, flags: string[]): Child {
  const child = runCli([
    `--proxy-server-host=${host}`,
    `--proxy-server-port=${port}`,
    '--health-server-port=0',
    '--health-server-host=127.0.0.1',
    '--sync-interval=200ms',
    '--sync-interval-cap=1s',
    '--log-format=json',
    ...flags,
  ]);
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await child.exited;
  });
  return child;
}

const clientFlags = (p = pki) => [...agentTlsFlags(p)];

/** The `error` of the first "cannot connect to proxy-server" log line. */
async function connectError(child: Child): Promise<string> {
  await child.waitFor(/cannot connect to proxy-server/, 20_000);
  const line = (child.stdout() + child.stderr()).split('\n').find((l) => l.includes('cannot connect to proxy-server'))!;
  return (JSON.parse(line) as { error: string }).error;
}

describe('TLS to the proxy-server, as the agent process reports it', () => {
  it("connects to an IP --proxy-server-host (checked against the certificate's IP names) without a deprecation warning", async () => {
    const h = await hub();
    const child = agent('127.0.0.1', h.ports.agent, clientFlags());
    await child.waitFor(/connected to proxy-server/, 20_000);
    expect(child.stderr()).not.toMatch(/DEP0123|DeprecationWarning/);
  });

  it('a server certificate not signed by --ca-cert: names the certificate, its issuer, the flag and the CAs in it', async () => {
    const other = makePki();
    const h = await hub(hubTls(other));
    const child = agent('localhost', h.ports.agent, clientFlags());
    const error = await connectError(child);
    expect(error).toContain(`the proxy-server localhost:${h.ports.agent} presented a certificate (subject CN=server`);
    // Both test CAs are called "ca": the message says the name matches but the key does not.
    expect(error).toContain(
      `that is not signed by a CA in --ca-cert=${pki.caCert} (which holds a CA named CN=ca, but not the one that signed this certificate: same name, different key)`,
    );
    expect(error).not.toMatch(/use-system-ca|No connection established|UNAVAILABLE/);
    expect(child.stderr()).not.toMatch(/DeprecationWarning/);
  });

  it("a server certificate without the --proxy-server-host name: names the certificate's names and the flag", async () => {
    const [cert, key] = pki.issue('elsewhere', { serverNames: ['hub.example'] });
    const h = await hub({ cert: readFileSync(cert), key: readFileSync(key), ca: readFileSync(pki.caCert) });
    const error = await connectError(agent('127.0.0.1', h.ports.agent, clientFlags()));
    expect(error).toContain('valid for DNS:hub.example');
    expect(error).toContain('that is not valid for "127.0.0.1" (from --proxy-server-host)');
  });

  it('a client certificate the server does not trust: says the server rejected --agent-cert', async () => {
    const other = makePki();
    const h = await hub();
    const error = await connectError(
      agent('localhost', h.ports.agent, [
        `--ca-cert=${pki.caCert}`,
        `--agent-cert=${other.clientCert}`,
        `--agent-key=${other.clientKey}`,
      ]),
    );
    // Our hub, like any Node server, checks the client certificate after the handshake and closes
    // without an alert (the Go server sends one: see the unit tests of tls-problem.ts).
    expect(error).toContain(
      `closed the connection right after the TLS handshake, before saying anything: it most likely refused our client certificate --agent-cert=${other.clientCert} (subject CN=client`,
    );
  });

  it('no client certificate where the server requires one: says to set --agent-cert and --agent-key', async () => {
    const h = await hub();
    const error = await connectError(agent('localhost', h.ports.agent, [`--ca-cert=${pki.caCert}`]));
    expect(error).toContain(
      'requires a client certificate and we sent no client certificate (--agent-cert is not set): set --agent-cert and --agent-key',
    );
  });
});
