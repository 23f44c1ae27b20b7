// --enable-profiling on a running agent (the real entry point): a CPU profile and a heap snapshot from
// the admin port, parsed as Chrome DevTools reads them; off by default.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';

let agent: Child;
let admin: string;

beforeAll(async () => {
  // --cluster-name= : the local hub without `npm start`'s demo.
  agent = runCli(['--cluster-name=', '--health-server-port=0', '--enable-profiling', '--admin-server-port=0']);
  const [, address, port] = await agent.waitFor(
    /"address":"([^"]+)","port":(\d+),"msg":"admin server listening/,
    60_000,
  );
  expect(address).toBe('127.0.0.1'); // --admin-bind-address's default
  admin = `http://127.0.0.1:${port}`;
  await agent.waitFor(/connected to proxy-server/);
}, 90_000);

afterAll(() => agent?.kill('SIGKILL'));

describe('--enable-profiling', () => {
  it('/debug/pprof/profile?seconds=1 is a .cpuprofile: V8 nodes, samples and times over about a second', async () => {
    const res = await fetch(`${admin}/debug/pprof/profile?seconds=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(
      /^attachment; filename="spoke-agent-\d+-[\dT-]+Z\.cpuprofile"$/,
    );
    const profile = (await res.json()) as {
      nodes: { id: number; callFrame: { functionName: string; url: string } }[];
      samples: number[];
      timeDeltas: number[];
      startTime: number;
      endTime: number;
    };
    expect(profile.nodes[0]!.callFrame.functionName).toBe('(root)');
    expect(profile.samples.length).toBeGreaterThan(0);
    expect(profile.timeDeltas.length).toBe(profile.samples.length);
    const ids = new Set(profile.nodes.map((n) => n.id));
    expect(profile.samples.every((id) => ids.has(id))).toBe(true);
    expect(profile.endTime - profile.startTime).toBeGreaterThanOrEqual(900_000); // microseconds
  }, 30_000);

  it('/debug/pprof/heap is a .heapsnapshot of this agent', async () => {
    const res = await fetch(`${admin}/debug/pprof/heap`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(/\.heapsnapshot"$/);
    const snapshot = (await res.json()) as {
      snapshot: { meta: { node_fields: string[]; edge_fields: string[] }; node_count: number; edge_count: number };
      nodes: number[];
      edges: number[];
      strings: string[];
    };
    const { meta, node_count, edge_count } = snapshot.snapshot;
    expect(meta.node_fields).toContain('name');
    expect(node_count).toBeGreaterThan(1000);
    expect(snapshot.nodes.length).toBe(node_count * meta.node_fields.length);
    expect(snapshot.edges.length).toBe(edge_count * meta.edge_fields.length);
    expect(snapshot.strings).toContain('ClientSet'); // the agent's own objects
  }, 60_000);

  it('refuses a bad ?seconds= with a clear error, and a second profile while one runs', async () => {
    for (const seconds of ['0', 'abc', '1.5', '301']) {
      const res = await fetch(`${admin}/debug/pprof/profile?seconds=${seconds}`);
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(`seconds must be a whole number from 1 to 300, got "${seconds}"\n`);
    }
    // A long first profile, under way once the agent says so; the client leaving ends it.
    const leave = new AbortController();
    const first = fetch(`${admin}/debug/pprof/profile?seconds=300`, { signal: leave.signal });
    await agent.waitFor(/"seconds":300,.*"msg":"taking a CPU profile"/);
    const second = await fetch(`${admin}/debug/pprof/profile?seconds=1`);
    expect(second.status).toBe(409);
    leave.abort();
    await expect(first).rejects.toThrow(/abort/i);
  }, 30_000);

  it('lists what it serves at /debug/pprof/', async () => {
    const text = await (await fetch(`${admin}/debug/pprof/`)).text();
    expect(text).toContain('/debug/pprof/profile?seconds=N');
    expect(text).toContain('/debug/pprof/heap');
  });
});

describe('without --enable-profiling', () => {
  it('nothing listens on --admin-server-port', async () => {
    const port = await unusedPort();
    const plain = runCli(['--cluster-name=', '--health-server-port=0', `--admin-server-port=${port}`]);
    try {
      await plain.waitFor(/spoke-agent started/, 60_000);
      const refused = await new Promise<string>((resolve) =>
        net
          .connect(port, '127.0.0.1')
          .on('connect', () => resolve('connected'))
          .on('error', (err: NodeJS.ErrnoException) => resolve(err.code!)),
      );
      expect(refused).toBe('ECONNREFUSED');
    } finally {
      plain.kill('SIGKILL');
    }
  }, 90_000);
});
