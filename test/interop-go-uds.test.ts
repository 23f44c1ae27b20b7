// The Go proxy-server's frontends on a Unix socket (--uds-name: plaintext, kube-apiserver's egress
// set-up), our agent behind it, and our client reaching them with --proxy-uds as the Go test-client
// does. Needs the Go binaries (test/support/reference-bins.ts); skipped with a note without them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, type TestPki } from './support/certs.js';
import { anpBinDir, GoServer } from './support/go-proxy-server.js';
import { lineThroughDial, runCli } from './support/processes.js';
import { missingBinariesNote } from './support/reference-bins.js';
import { skipNote } from './support/skips.js';
import { echoRoundTrip, pattern, sha256, startEchoServer, type Target } from './support/targets.js';

const binDir = anpBinDir();
if (!binDir) skipNote('interop-go-uds', missingBinariesNote('ANP_BIN_DIR', 'anp', ['proxy-server']));

let pki: TestPki;
let dir: string;
let servers: Record<'grpc' | 'http-connect', GoServer>;
let agent: StartedAgent | undefined;
let echo: Target;

describe.skipIf(!binDir)('the Go proxy-server on a Unix socket (--uds-name), reached with --proxy-uds', () => {
  beforeAll(async () => {
    pki = makePki();
    dir = mkdtempSync(join(tmpdir(), 'spoke-uds-'));
    echo = await startEchoServer();
    servers = {
      grpc: await GoServer.create(binDir!, 'grpc', 'destHost,default', 'go-uds-grpc', { uds: join(dir, 'grpc.sock') }),
      'http-connect': await GoServer.create(binDir!, 'http-connect', 'destHost,default', 'go-uds-connect', {
        uds: join(dir, 'connect.sock'),
      }),
    };
    await Promise.all(Object.values(servers).map((s) => s.start(pki)));
    const [cert, key] = pki.issue('agent', { client: true });
    agent = startAgent(
      Object.values(servers).map((s) => `127.0.0.1:${s.ports.agent}`),
      [
        `--ca-cert=${pki.caCert}`,
        `--agent-cert=${cert}`,
        `--agent-key=${key}`,
        '--agent-identifiers=host=localhost&ipv4=127.0.0.1',
        '--sync-interval=200ms',
        '--sync-interval-cap=1s',
      ],
    );
    await agent.ready(2, 15_000);
  });

  afterAll(async () => {
    agent?.stop();
    await Promise.all(Object.values(servers ?? {}).map((s) => s.stop()));
    await echo?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(['grpc', 'http-connect'] as const)('dialThroughProxy --mode=%s: 256 KiB echoed intact', async (mode) => {
    const conn = await dialThroughProxy({
      mode,
      proxyHost: 'unused',
      proxyPort: 0,
      proxyUds: servers[mode].uds!,
      address: echo.address,
      timeoutMs: 15_000,
    });
    const payload = pattern(256 << 10, 3);
    expect(await echoRoundTrip(conn, payload)).toBe(sha256(payload));
    conn.destroy();
  });

  it.each(['grpc', 'http-connect'] as const)(
    'spoke-agent dial --proxy-uds --mode=%s pipes stdin through and exits 0',
    async (mode) => {
      const r = await lineThroughDial([`--mode=${mode}`, `--proxy-uds=${servers[mode].uds!}`], echo.address);
      expect(r.stdout, r.stderr).toBe('ping\n');
      expect(r.code, r.stderr).toBe(0);
    },
  );

  it('refuses TLS flags with --proxy-uds (the socket is plaintext) as a usage error', async () => {
    const dial = runCli(['dial', `--proxy-uds=${servers.grpc.uds!}`, `--ca-cert=${pki.caCert}`, echo.address]);
    dial.end();
    expect((await dial.exited).code).toBe(2);
    expect(dial.stderr()).toContain('--proxy-uds is plaintext');
  });
});
