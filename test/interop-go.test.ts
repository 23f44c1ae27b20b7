// Interoperability test against the real Go proxy-server and test-client of
// kubernetes-sigs/apiserver-network-proxy (ANP), once per release found: release-0.30 ($ANP_BIN_DIR,
// else ~/.cache/spoke-agent/anp once that holds READY) and v0.36.0, what cluster-proxy v0.11 pins
// ($ANP_V036_BIN_DIR, else ~/.cache/spoke-agent/anp-v0.36); a release whose binaries are not there is
// skipped with a note saying where it looked. Nothing in this repo builds or ships them.
//
// Which binaries, from which repository and version: CONTRIBUTING.md, "Reference peers".
// Run: `npx vitest run test/interop-go.test.ts`.
//
// Where the releases differ, each test says what the release does: v0.31+ reads DRAIN, exports
// ready_backends{proxy_strategy} and answers an HTTP CONNECT it cannot serve with an HTTP error;
// release-0.30 ignores DRAIN ("Ignoring unrecognized packet"), and its HTTP CONNECT frontend has
// answered 200 before it picks a backend, so its refusals come as a 503 response inside the tunnel.
//
// What runs, all on 127.0.0.1 with ephemeral ports and certificates from test/support/certs.ts:
//   - Go proxy-server A: --mode=grpc, --proxy-strategies=destHost,default, mTLS on both ports
//   - Go proxy-server B: --mode=http-connect, --proxy-strategies=destHost (so an unknown host has no agent)
//   - our agent in-process, connected to both (host=localhost&ipv4=127.0.0.1)
//   - Node targets (TCP echo, HTTP), dialled by the Go test-client and by client/dial.ts
// The Go servers run at -v=5; their logs are checked for protocol complaints about our agent.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DialError, dialThroughProxy, type DialOptions } from '../client/dial.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, type TestPki } from './support/certs.js';
import { anpReleases, GoServer, type AnpRelease } from './support/go-proxy-server.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import {
  echoRoundTrip,
  pattern,
  sha256,
  startEchoServer,
  startHttpServer,
  unusedPort,
  type Target,
} from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const goBinaries = ['proxy-server', 'proxy-test-client'];
const { found, missing } = anpReleases(goBinaries);
for (const note of missing) skipNote('interop-go', note);
const agentID = 'spoke-interop-agent';

function interopSuite(release: AnpRelease): void {
  /** Runs the Go test-client; resolves with its exit code and output. */
  function testClient(server: GoServer, args: string[]): Promise<{ code: number | null; output: string }> {
    return new Promise((resolve) => {
      const proc = spawn(
        join(release.dir, 'proxy-test-client'),
        [
          `--mode=${server.mode}`,
          '--proxy-host=127.0.0.1',
          `--proxy-port=${server.ports.server}`,
          `--ca-cert=${pki.caCert}`,
          `--client-cert=${pki.clientCert}`,
          `--client-key=${pki.clientKey}`,
          '-v=4',
          ...args,
        ],
        // The test-client closes its proxy connection on *any* signal (signal.Notify with no list), and
        // the Go runtime's preemption signal (SIGURG) is one: with several requests in parallel that
        // breaks requests at random. Not our bug, so keep the runtime from sending it.
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GODEBUG: 'asyncpreemptoff=1' } },
      );
      let output = '';
      proc.stdout.on('data', (b: Buffer) => (output += b.toString()));
      proc.stderr.on('data', (b: Buffer) => (output += b.toString()));
      const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
      proc.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, output });
      });
    });
  }

  let pki: TestPki;
  let grpcServer: GoServer;
  let connectServer: GoServer;
  let agent: StartedAgent | undefined;
  let echo: Target;
  let web: Target;

  function dial(server: GoServer, address: string, timeoutMs = 15_000): Promise<Duplex> {
    const opts: DialOptions = {
      mode: server.mode,
      proxyHost: '127.0.0.1',
      proxyPort: server.ports.server,
      ca: readFileSync(pki.caCert),
      cert: readFileSync(pki.clientCert),
      key: readFileSync(pki.clientKey),
      address,
      timeoutMs,
    };
    return dialThroughProxy(opts);
  }

  async function dialError(server: GoServer, address: string): Promise<DialError> {
    const err = await dial(server, address).then(
      (conn) => {
        conn.destroy();
        throw new Error(`dial ${address} unexpectedly succeeded`);
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DialError);
    return err as DialError;
  }

  const closed = (conn: Duplex) =>
    new Promise<void>((resolve) => (conn.destroyed ? resolve() : conn.once('close', () => resolve())));

  /** What arrives on a tunnel until the far side ends it (the deadline only bounds a failure). */
  async function received(conn: Duplex): Promise<string> {
    let text = '';
    let ended = false;
    conn.on('data', (c: Buffer) => (text += c.toString()));
    conn.on('error', () => {});
    conn.on('end', () => (ended = true));
    conn.on('close', () => (ended = true));
    try {
      await waitUntil(
        () => ended,
        20_000,
        () => `the tunnel to end (${JSON.stringify(text)} so far)`,
      );
    } finally {
      conn.destroy();
    }
    return text;
  }

  /**
   * An HTTP CONNECT dial the server refuses: a v0.31+ server answers the CONNECT with `status` and the
   * reason; release-0.30 has already answered 200, and sends a 503 response inside the tunnel
   * (ProxyClientConnection.send) for a refused dial, or nothing for no backend, then closes.
   */
  async function connectRefusal(server: GoServer, address: string, status: number): Promise<string> {
    if (release.modern) {
      const err = await dialError(server, address);
      expect(err.httpStatus).toBe(status);
      return err.message;
    }
    return received(await dial(server, address));
  }

  describe(`interop with the Go proxy-server and test-client ${release.name} (${release.dir})`, () => {
    beforeAll(async () => {
      pki = makePki();
      [echo, web] = await Promise.all([startEchoServer(), startHttpServer()]);
      grpcServer = await GoServer.create(release.dir, 'grpc', 'destHost,default', 'go-grpc');
      connectServer = await GoServer.create(release.dir, 'http-connect', 'destHost', 'go-connect');
      await Promise.all([grpcServer.start(pki), connectServer.start(pki)]);
    });

    afterAll(async () => {
      agent?.stop();
      await Promise.all([grpcServer?.stop(), connectServer?.stop()]);
      await Promise.all([echo?.close(), web?.close()]);
    });

    it('answers "No agent available" while no agent is connected', async () => {
      expect((await dialError(grpcServer, echo.address)).message).toBe('No agent available');
      expect(
        sampleValue(
          await grpcServer.metrics(),
          'konnectivity_network_proxy_server_dial_failure_count{reason="no_agent"}',
        ),
      ).toBe(1);
      const viaConnect = await connectRefusal(connectServer, echo.address, 500);
      if (release.modern) expect(viaConnect).toContain('No agent available');
      else expect(viaConnect).toBe('');
    });

    it('connects to both Go servers (serverID/serverCount headers) and they register its identifiers', async () => {
      const [agentCert, agentKey] = pki.issue('agent', { client: true });
      agent = startAgent(
        [`127.0.0.1:${grpcServer.ports.agent}`, `127.0.0.1:${connectServer.ports.agent}`],
        [
          `--ca-cert=${pki.caCert}`,
          `--agent-cert=${agentCert}`,
          `--agent-key=${agentKey}`,
          `--agent-id=${agentID}`,
          '--agent-identifiers=host=localhost&ipv4=127.0.0.1',
          '--sync-interval=200ms',
          '--sync-interval-cap=1s',
        ],
      );
      await agent.ready(2, 15_000);
      expect(new Set(agent.agent.clients.serverIDs())).toEqual(new Set(['go-grpc', 'go-connect']));
      for (const server of [grpcServer, connectServer]) {
        await waitUntil(
          () => server.lines(/"Agent connected"/).some((l) => l.includes(agentID)),
          20_000,
          `${server.serverID} to log the agent`,
        );
        if (!release.modern) continue; // release-0.30 has no ready_backends
        const m = await server.metrics();
        expect(sampleValue(m, 'konnectivity_network_proxy_server_ready_backends{proxy_strategy="destHost"}')).toBe(2); // host=localhost, ipv4=127.0.0.1
        if (server === grpcServer)
          expect(sampleValue(m, 'konnectivity_network_proxy_server_ready_backends{proxy_strategy="default"}')).toBe(1);
      }
    });

    /** The Go test-client through `server`, by host name and by IP: 20 pages each. */
    const twentyPagesEach = async (server: GoServer) => {
      for (const host of ['localhost', '127.0.0.1']) {
        const { code, output } = await testClient(server, [
          `--request-host=${host}`,
          `--request-port=${web.port}`,
          '--request-path=success',
          '--test-requests=20',
        ]);
        expect(code, output).toBe(0);
        expect(output.match(/hello from \/success/g)?.length, output).toBe(20);
      }
    };

    it('the Go test-client gets its page in grpc mode, by host name and by IP, 20 requests each', async () => {
      await twentyPagesEach(grpcServer);
      expect(
        grpcServer.lines(/"Get the backend through the DestHostBackendManager" destHost="localhost"/).length,
      ).toBeGreaterThan(0);
    });

    it('the Go test-client gets its page in http-connect mode, by host name and by IP, 20 requests each', async () => {
      await twentyPagesEach(connectServer);
    });

    it("the Go test-client sees the agent's refusal text (grpc) and a 502 (http-connect)", async () => {
      const refused = await unusedPort();
      const viaGrpc = await testClient(grpcServer, ['--request-host=127.0.0.1', `--request-port=${refused}`]);
      expect(viaGrpc.code).not.toBe(0);
      expect(viaGrpc.output).toContain(
        `failed to dial request 127.0.0.1:${refused}, got dial tcp 127.0.0.1:${refused}: connect: connection refused`,
      );
      const viaConnect = await testClient(connectServer, ['--request-host=127.0.0.1', `--request-port=${refused}`]);
      if (release.modern) {
        expect(viaConnect.code).not.toBe(0);
        expect(viaConnect.output).toContain('502 Bad Gateway');
      } else {
        // release-0.30's 503 comes inside the tunnel, where the test-client reads its page: it prints
        // the agent's refusal as the page and exits 0
        expect(viaConnect.code).toBe(0);
        expect(viaConnect.output).toContain(
          `HTML Response:\ndial tcp 127.0.0.1:${refused}: connect: connection refused`,
        );
      }
    });

    it('dialThroughProxy through the Go grpc frontend (mTLS): 1 MiB echoed intact, then CLOSE_REQ -> CLOSE_RSP', async () => {
      const from = grpcServer.log.length;
      const conn = await dial(grpcServer, echo.address);
      const payload = pattern(1 << 20, 7);
      expect(await echoRoundTrip(conn, payload)).toBe(sha256(payload));
      conn.end();
      await closed(conn);
      await waitUntil(
        () => grpcServer.lines(/"CLOSE_RSP sent to frontend"/, from).length > 0,
        20_000,
        'the CLOSE_RSP to reach the frontend',
      );
      expect(grpcServer.lines(/"Received CLOSE_REQ"/, from).length).toBe(1);
      expect(grpcServer.lines(/"Received CLOSE_RSP".*agentID="spoke-interop-agent"/, from).length).toBe(1);
      // The dial log has it, with the Go server's ID and, once closed, the bytes each way.
      const logged = () =>
        agent!.agent.dialLog!.current().find((e) => e.destination === echo.address && e.server === grpcServer.serverID);
      await waitUntil(() => logged()?.open === false, 20_000, 'the dial log to record the close');
      expect(logged()).toMatchObject({
        result: 'connected',
        bytesToTarget: 1 << 20,
        bytesFromTarget: 1 << 20,
        closedBy: 'CLOSE_REQ',
        durationMs: expect.any(Number),
      });
    });

    it('dialThroughProxy through the Go http-connect frontend: 1 MiB echoed intact', async () => {
      const conn = await dial(connectServer, `localhost:${echo.port}`);
      const payload = pattern(1 << 20, 9);
      expect(await echoRoundTrip(conn, payload)).toBe(sha256(payload));
      conn.destroy();
    });

    it('the target closing ends the client connection (the agent sends CLOSE_RSP)', async () => {
      const from = grpcServer.log.length;
      const conn = await dial(grpcServer, web.address);
      const body: Buffer[] = [];
      conn.on('data', (c: Buffer) => body.push(c));
      conn.write('GET /remote-close HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n');
      await closed(conn);
      expect(Buffer.concat(body).toString()).toContain('hello from /remote-close');
      await waitUntil(
        () => grpcServer.lines(/"CLOSE_RSP sent to frontend"/, from).length > 0,
        20_000,
        'CLOSE_RSP forwarded',
      );
      expect(grpcServer.lines(/"Received CLOSE_REQ"/, from)).toEqual([]);
    });

    it('a ~20 MB download whose target closes right after its last write arrives whole, every time, in both modes', async () => {
      // ANP master (PR #871) flushes a connection's queued DATA before its CLOSE_RSP; before, such a
      // download arrived cut (~20.6 of 20.9 MB). Our agent writes DATA and CLOSE_RSP in order on one stream.
      const payload = pattern(20_900_000, 29);
      const digest = sha256(payload);
      // It answers a request, as an HTTP server does (a target that speaks first can overtake the v0.36
      // http-connect frontend's own 200: the server writes both from different goroutines).
      const source = createServer((s) => s.once('data', () => s.end(payload)));
      await new Promise<void>((r) => source.listen(0, '127.0.0.1', () => r()));
      try {
        const address = `localhost:${(source.address() as AddressInfo).port}`;
        for (const server of [grpcServer, connectServer])
          for (let i = 0; i < 3; i++) {
            const conn = await dial(server, address);
            const chunks: Buffer[] = [];
            conn.on('data', (c: Buffer) => chunks.push(c));
            conn.write('GET /download\r\n\r\n');
            await closed(conn);
            const got = Buffer.concat(chunks);
            expect({ mode: server.mode, bytes: got.length, sha256: sha256(got) }).toEqual({
              mode: server.mode,
              bytes: payload.length,
              sha256: digest,
            });
          }
      } finally {
        await new Promise((r) => source.close(r));
      }
    }, 120_000);

    it("a refused dial carries the agent's Go-worded error to our client; the server counts it as error_response", async () => {
      const refused = await unusedPort();
      const before =
        sampleValue(
          await grpcServer.metrics(),
          'konnectivity_network_proxy_server_dial_failure_count{reason="error_response"}',
        ) ?? 0;
      expect((await dialError(grpcServer, `127.0.0.1:${refused}`)).message).toBe(
        `dial tcp 127.0.0.1:${refused}: connect: connection refused`,
      );
      const viaConnect = await connectRefusal(connectServer, `127.0.0.1:${refused}`, 502);
      if (!release.modern) expect(viaConnect).toMatch(/^HTTP\/0.0 503 Service Unavailable\r\n/);
      expect(viaConnect).toContain(`dial tcp 127.0.0.1:${refused}: connect: connection refused`);
      expect(
        sampleValue(
          await grpcServer.metrics(),
          'konnectivity_network_proxy_server_dial_failure_count{reason="error_response"}',
        ),
      ).toBe(before + 1);
    });

    it('"No agent available" for a host no agent advertises (destHost only)', async () => {
      const refusal = await connectRefusal(connectServer, 'no-such-agent.invalid:80', 500);
      if (release.modern) expect(refusal).toContain('No agent available');
      else expect(refusal).toBe('');
    });

    it("no protocol complaints about our agent in the Go servers' logs", async () => {
      for (const server of [grpcServer, connectServer]) {
        expect(server.lines(/unrecognized|mismatched|Ignoring unrecognized packet|expected one/i)).toEqual([]);
        expect(sampleValue(await server.metrics(), 'konnectivity_network_proxy_server_established_connections')).toBe(
          0,
        );
      }
    });

    it('reconnects after the Go server restarts', async () => {
      await grpcServer.stop();
      await waitUntil(() => !agent!.agent.clients.serverIDs().includes('go-grpc'), 10_000, 'the agent to notice');
      const from = grpcServer.log.length;
      await grpcServer.start(pki);
      await agent!.ready(2, 30_000);
      // The server's log line may reach us a moment after the agent counts the connection.
      await waitUntil(
        () => grpcServer.lines(/"Agent connected"/, from).some((l) => l.includes(agentID)),
        30_000,
        'the Go server to log the agent',
      );
      const conn = await dial(grpcServer, echo.address);
      expect(await echoRoundTrip(conn, Buffer.from('again'))).toBe(sha256('again'));
      conn.destroy();
    });

    it('DRAIN from an idle agent reaches the Go server before the stream ends', async () => {
      const [cert, key] = pki.issue('idle-agent', { client: true });
      const idle = startAgent(
        [`127.0.0.1:${connectServer.ports.agent}`],
        [
          `--ca-cert=${pki.caCert}`,
          `--agent-cert=${cert}`,
          `--agent-key=${key}`,
          '--agent-id=spoke-idle-agent',
          '--agent-identifiers=host=idle.example',
        ],
      );
      try {
        await idle.ready(1, 15_000);
        const from = connectServer.log.length;
        await idle.agent.drain(5000);
        await waitUntil(
          () => connectServer.lines(/"Close backend of agent" agentID="spoke-idle-agent"/, from).length > 0,
          20_000,
          'the idle agent stream to end',
        );
        // release-0.30 does not know the packet type, and says so
        if (release.modern)
          expect(connectServer.lines(/"agent is draining" agentID="spoke-idle-agent"/, from)).toHaveLength(1);
        if (!release.modern)
          expect(
            connectServer.lines(
              /"Ignoring unrecognized packet from backend" packet="type:6 .*agentID="spoke-idle-agent"/,
              from,
            ),
          ).toHaveLength(1);
      } finally {
        idle.stop();
      }
    });

    it('an agent with a rule\'s stream, draining, leaves the Go server (destHost,default: streams keyed by agentID too) with no "should not happen"', async () => {
      const [cert, key] = pki.issue('rules-agent', { client: true });
      const ruled = startAgent(
        [`127.0.0.1:${grpcServer.ports.agent}`],
        [`--ca-cert=${pki.caCert}`, `--agent-cert=${cert}`, `--agent-key=${key}`, '--agent-id=spoke-rules-agent'],
        {
          identifiers: { own: 'host=own.ruled', groups: ['host=rule.ruled'] },
          resolve: async () => ({ addresses: ['127.0.0.1'] }),
        },
      );
      try {
        await ruled.ready(1, 15_000);
        const from = grpcServer.log.length;
        await waitUntil(
          () => grpcServer.lines(/"Agent connected"/).filter((l) => l.includes('spoke-rules-agent')).length >= 2,
          20_000,
          'both streams registered',
        );
        const conn = await dial(grpcServer, `rule.ruled:${echo.port}`);
        const drained = ruled.agent.drain(10_000);
        // DRAIN goes out on every stream as soon as draining starts, the idle first stream's too, while
        // the connection on the rule's stream is still open (ANP master, PR #893).
        const drainSeen = release.modern
          ? /"agent is draining" agentID="spoke-rules-agent"/
          : /"Ignoring unrecognized packet from backend" packet="type:6 .*agentID="spoke-rules-agent"/;
        await waitUntil(() => grpcServer.lines(drainSeen, from).length === 2, 20_000, 'DRAIN on both streams');
        expect(await echoRoundTrip(conn, Buffer.from('draining'))).toBe(sha256('draining'));
        conn.destroy();
        await drained;
        await waitUntil(
          () => grpcServer.lines(/"Close backend of agent" agentID="spoke-rules-agent"/, from).length >= 2,
          20_000,
          'both streams to end',
        );
        // The Go server sends a stream's response headers before it registers the stream
        // (SendHeader, then addBackend), so under load the rule's stream, opened once the first
        // stream's headers came, can be registered first; retiring it first then makes the server say
        // "should not happen" of its own ordering, which no agent can see. Its registration lines (one
        // per identifier, destHost before default) tell which went first.
        const registered = grpcServer
          .lines(/"Register backend for agent" agentID="(own|rule)\.ruled"/)
          .map((l) => (l.includes('own.ruled') ? 'own' : 'rule'));
        if (registered[0] === 'own') expect(grpcServer.lines(/should not happen/, from)).toEqual([]);
        else expect(registered, 'the server registered the rule stream first').toEqual(['rule', 'own']);
      } finally {
        ruled.stop();
      }
    });

    it("an agent with 4,000 names in its identifiers (one ~160 KB header, past Node's own 64 KiB send limit) is registered", async () => {
      const [cert, key] = pki.issue('many-names-agent', { client: true });
      const identifiers = Array.from({ length: 4000 }, (_, i) => `host=service-${i}.namespace-${i % 50}.cluster1`).join(
        '&',
      );
      expect(identifiers.length).toBeGreaterThan(150_000);
      const before =
        sampleValue(
          await connectServer.metrics(),
          'konnectivity_network_proxy_server_ready_backends{proxy_strategy="destHost"}',
        ) ?? 0;
      const many = startAgent(
        [`127.0.0.1:${connectServer.ports.agent}`],
        [
          `--ca-cert=${pki.caCert}`,
          `--agent-cert=${cert}`,
          `--agent-key=${key}`,
          '--agent-id=spoke-many-names',
          `--agent-identifiers=${identifiers}`,
        ],
      );
      try {
        await many.ready(1, 15_000);
        if (release.modern) {
          let registered = 0;
          const read = async () => {
            registered =
              sampleValue(
                await connectServer.metrics(),
                'konnectivity_network_proxy_server_ready_backends{proxy_strategy="destHost"}',
              ) ?? 0;
            return registered >= before + 4000;
          };
          await waitUntilAsync(read, 10_000, 'the Go server to register the 4,000 names');
          expect(registered).toBe(before + 4000);
        }
        // The last name routes to the agent, which cannot resolve it: its answer, not "No agent available".
        let refusal = '';
        const routed = async () => {
          refusal = await connectRefusal(connectServer, 'service-3999.namespace-49.cluster1:80', 502);
          return /dial tcp: lookup service-3999.namespace-49.cluster1/.test(refusal);
        };
        await waitUntilAsync(routed, 10_000, `the last name to reach the agent (got ${JSON.stringify(refusal)})`, 200);
      } finally {
        many.stop();
      }
    });

    it(`two agents for one name, one draining: ${release.modern ? 'new dials go to the other' : 'release-0.30 keeps routing to the first (it does not read DRAIN)'}`, async () => {
      // Each agent dials the name to a greeter of its own (127.0.0.1 and 127.0.0.2, one port), so the
      // greeting says which agent served a dial.
      const listen = (server: Server, port: number, host: string) =>
        new Promise<number>((resolve) =>
          server.listen(port, host, () => resolve((server.address() as AddressInfo).port)),
        );
      const greeterA = createServer((s) => s.end('agent-a'));
      const greeterB = createServer((s) => s.end('agent-b'));
      const port = await listen(greeterA, 0, '127.0.0.1');
      await listen(greeterB, port, '127.0.0.2');
      const started: StartedAgent[] = [];
      try {
        for (const [name, ip] of [
          ['a', '127.0.0.1'],
          ['b', '127.0.0.2'],
        ] as const) {
          const [cert, key] = pki.issue(`drain-${name}`, { client: true });
          const a = startAgent(
            [`127.0.0.1:${grpcServer.ports.agent}`],
            [
              `--ca-cert=${pki.caCert}`,
              `--agent-cert=${cert}`,
              `--agent-key=${key}`,
              `--agent-id=spoke-drain-${name}`,
              '--agent-identifiers=host=drain.example',
            ],
            { resolve: async () => ({ addresses: [ip] }) },
          );
          started.push(a);
          await a.ready(1, 15_000);
          await waitUntil(
            () => grpcServer.lines(/"Agent connected"/).some((l) => l.includes(`spoke-drain-${name}`)),
            20_000,
            `agent ${name} registered`,
          );
        }
        const greeting = async () => received(await dial(grpcServer, `drain.example:${port}`));
        for (let i = 0; i < 3; i++) expect(await greeting()).toBe('agent-a'); // the first registered serves the name
        const from = grpcServer.log.length;
        const draining = started[0]!.agent.drain(10_000);
        if (release.modern)
          await waitUntil(
            () => grpcServer.lines(/"agent is draining" agentID="spoke-drain-a"/, from).length > 0,
            20_000,
            'the server to read the DRAIN',
          );
        else
          await waitUntil(
            () =>
              grpcServer.lines(
                /"Ignoring unrecognized packet from backend" packet="type:6 .*agentID="spoke-drain-a"/,
                from,
              ).length > 0,
            20_000,
            'release-0.30 to ignore the DRAIN',
          );
        for (let i = 0; i < 3; i++) expect(await greeting()).toBe(release.modern ? 'agent-b' : 'agent-a');
        await draining;
      } finally {
        for (const a of started) a.stop();
        greeterA.close();
        greeterB.close();
      }
    });

    it('DRAIN: the Go server marks the backend draining, an open connection keeps working and its last CLOSE_RSP arrives', async () => {
      const from = grpcServer.log.length;
      const held = await dial(grpcServer, echo.address);
      const draining = agent!.agent.drain(20_000);
      if (release.modern) {
        await waitUntil(
          () => grpcServer.lines(/"agent is draining"/, from).some((l) => l.includes(agentID)),
          20_000,
          'the Go server to log the DRAIN',
        );
        expect(grpcServer.lines(/marked backend as draining/, from).length).toBe(1);
      } else
        await waitUntil(
          () =>
            grpcServer
              .lines(/"Ignoring unrecognized packet from backend" packet="type:6 /, from)
              .some((l) => l.includes(agentID)),
          20_000,
          'release-0.30 to ignore the DRAIN',
        );
      // Still flows; and with no other agent the server falls back to the draining one for new dials
      // (release-0.30 does not know it drains).
      expect(await echoRoundTrip(held, Buffer.from('during drain'))).toBe(sha256('during drain'));
      const fresh = await dial(grpcServer, echo.address);
      expect(await echoRoundTrip(fresh, Buffer.from('new dial'))).toBe(sha256('new dial'));
      fresh.end();
      held.end();
      await draining;
      await waitUntil(
        () =>
          grpcServer.lines(/"Receive stream from agent is closed"|Stream read from agent cancelled/, from).length > 0,
        20_000,
        'the agent stream to end',
      );
      // Every CLOSE_RSP written before the stream ended reached the server: nothing left established.
      expect(grpcServer.lines(/"Close established connections to agent"/, from)).toEqual([]);
      expect(sampleValue(await grpcServer.metrics(), 'konnectivity_network_proxy_server_established_connections')).toBe(
        0,
      );
    });
  });
}

for (const release of found) interopSuite(release);
if (found.length === 0)
  describe.skip('interop with the Go proxy-server (binaries not found)', () => it('needs the ANP binaries', () => {}));
