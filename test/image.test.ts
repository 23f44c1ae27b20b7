// The Dockerfile cannot be built here (no container engine), so its stages are replayed on this
// machine: the build context filtered by .dockerignore, each COPY into a folder per stage, each RUN
// in it, then the ENTRYPOINT with our Node 24 standing in for the image's /nodejs/bin/node.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyOfRepo, repoRoot, run } from './support/processes.js';
import { startEchoServer } from './support/targets.js';

interface Stage {
  name: string;
  from: string;
  steps: Array<{ op: string; args: string }>;
}

/** Stages with their instructions; continuation lines joined, comments dropped. */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m || line.trimStart().startsWith('#')) continue;
    const [, op, args] = m as unknown as [string, string, string];
    if (op === 'FROM') {
      const [from, , name] = args.split(/\s+/);
      stages.push({ name: name ?? `stage${stages.length}`, from: from!, steps: [] });
    } else stages.at(-1)!.steps.push({ op, args });
  }
  return stages;
}

/** .dockerignore patterns as Docker reads them (Go filepath.Match plus `**`), no `!` exceptions. */
function ignoredBy(dockerignore: string): (path: string) => boolean {
  const patterns = dockerignore.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  if (patterns.some((p) => p.startsWith('!'))) throw new Error('exceptions are not replayed');
  const res = patterns.map((p) => new RegExp(`^${p.replace(/^\//, '').replace(/[.+^${}()|[\]]/g, '\\$&').replace(/\*\*\//g, '\0').replace(/\*\*/g, '.*').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]').replace(/\0/g, '(?:.*/)?')}$`));
  // A pattern that matches a folder excludes everything in it.
  return (path) => path.split('/').some((_, i, parts) => res.some((re) => re.test(parts.slice(0, i + 1).join('/'))));
}

const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const runtime = stages.at(-1)!;
const entrypoint = JSON.parse(runtime.steps.find((s) => s.op === 'ENTRYPOINT')!.args) as string[];

let tmp: string;
let context: { dir: string; remove(): void };
const fs: Record<string, { dir: string; workdir: string }> = {};
/** The runtime image's ENTRYPOINT, as [command, ...args] on this machine. */
let entry: string[];

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'spoke-agent-image-'));
  context = copyOfRepo({ linkNodeModules: false });
  const ignored = ignoredBy(readFileSync(join(repoRoot, '.dockerignore'), 'utf8'));
  const walk = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
  for (const file of walk(context.dir)) if (ignored(relative(context.dir, file))) rmSync(file);

  for (const stage of stages) {
    const root = join(tmp, stage.name);
    let workdir = '/';
    fs[stage.name] = { dir: root, workdir };
    const here = (abs: string) => join(root, abs);
    for (const { op, args } of stage.steps) {
      if (op === 'WORKDIR') {
        workdir = posix.resolve(workdir, args);
        fs[stage.name]!.workdir = workdir;
        mkdirSync(here(workdir), { recursive: true });
      } else if (op === 'COPY') {
        const words = args.split(/\s+/);
        const fromStage = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
        const [dest, ...sources] = words.filter((w) => !w.startsWith('--')).reverse();
        for (const src of sources.reverse()) {
          // From the context: relative to it; from a stage: an absolute path in that stage's files.
          const from = fromStage ? join(fs[fromStage]!.dir, src) : join(context.dir, src);
          expect(existsSync(from), `COPY ${fromStage ? `--from=${fromStage} ` : ''}${src} (stage ${stage.name})`).toBe(true);
          const to = here(posix.resolve(workdir, dest!));
          cpSync(from, sources.length > 1 || dest!.endsWith('/') ? join(to, posix.basename(src)) : to, { recursive: true });
        }
      } else if (op === 'RUN') {
        const cwd = here(workdir);
        // The full dev install is the repo's own node_modules (too slow to repeat); anything else runs as written.
        if (/^npm (ci|install)\b/.test(args) && !args.includes('--omit=dev')) symlinkSync(join(repoRoot, 'node_modules'), join(cwd, 'node_modules'), 'dir');
        else execFileSync('sh', ['-c', args], { cwd, stdio: 'pipe', env: { ...process.env, npm_config_prefer_offline: 'true' } });
      }
    }
  }
  const app = fs[runtime.name]!;
  entry = entrypoint.map((a) => (a === '/nodejs/bin/node' ? process.execPath : a.startsWith('/') ? join(app.dir, a) : a));
}, 600_000);

afterAll(() => {
  context?.remove();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('Dockerfile', () => {
  it('runs on a Node 24 distroless non-root base, as a numeric non-root user', () => {
    expect(runtime.from).toMatch(/^gcr\.io\/distroless\/nodejs24-debian\d+:nonroot$/);
    const user = runtime.steps.find((s) => s.op === 'USER')?.args;
    expect(user).toMatch(/^[1-9]\d*(:\d+)?$/); // numeric, so runAsNonRoot can verify it
    for (const s of stages.slice(0, -1)) expect(s.from).toMatch(/^node:24[-.]/);
    expect(entrypoint[0]).toBe('/nodejs/bin/node');
    expect(entrypoint.at(-1)).toBe('/app/dist/cmd/main.js');
  });

  it('ships the bundle, which carries its dependencies, and no node_modules', () => {
    const app = join(fs[runtime.name]!.dir, 'app');
    expect(existsSync(join(app, 'node_modules'))).toBe(false);
    expect(existsSync(join(app, 'dist/cmd/main.js'))).toBe(true);
    expect(existsSync(join(app, 'dist/proto/agent.proto'))).toBe(true);
    // The DNS server's batched-UDP helper, compiled in the build stage (Linux only: recvmmsg/sendmmsg).
    if (process.platform === 'linux') expect(existsSync(join(app, 'build/udp-batch.node'))).toBe(true);
  });

  it('the entrypoint answers --help, dns --help and dial --help with exit 0', async () => {
    for (const args of [['--help'], ['dns', '--help'], ['dial', '--help']]) {
      const p = run(entry[0]!, [...entry.slice(1), ...args], { cwd: join(fs[runtime.name]!.dir, 'app') });
      expect((await p.exited).code, `${args.join(' ')}: ${p.stderr()}`).toBe(0);
    }
  });

  it('/proxy-agent (what cluster-proxy runs) is an executable that starts the same agent: --help, and the Go agent\'s flags', async () => {
    const root = fs[runtime.name]!.dir;
    const script = join(root, 'proxy-agent');
    expect(statSync(script).mode & 0o111, 'executable').toBe(0o111);
    const text = readFileSync(script, 'utf8');
    // No shell in the image: the kernel runs the interpreter named here, the image's Node.
    expect(text.split('\n')[0]).toBe('#!/nodejs/bin/node');
    // Replayed through the kernel too, with this machine's Node in the image's Node's place.
    writeFileSync(script, text.replace(/^#!.*/, `#!${process.execPath}`));
    const help = run(script, ['--help'], { cwd: '/' });
    expect((await help.exited).code, help.stderr()).toBe(0);
    expect(help.stdout()).toMatch(/^Usage: spoke-agent \[flags\]/);
    for (const flag of ['--proxy-server-host', '--agent-identifiers', '--ca-cert', '--agent-cert', '--agent-key', '--cluster-name']) expect(help.stdout()).toContain(flag);
    // A Go agent flag value error is the agent's own: exit 2 with its message.
    const bad = run(script, ['--agent-identifiers=bogus=1'], { cwd: '/' });
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr()).toMatch(/unknown address type: bogus/);
  });

  it('the entrypoint runs the agent (local hub), tunnels a connection, and exits 0 on SIGTERM', async () => {
    const echo = await startEchoServer();
    // --cluster-name= : the local hub alone, without npm start's demo (whose rule would not allow the echo server).
    const agent = run(entry[0]!, [...entry.slice(1), '--cluster-name=', '--health-server-port=0'], { cwd: join(fs[runtime.name]!.dir, 'app') });
    try {
      const port = Number((await agent.waitFor(/HTTP CONNECT (\d+)\)/))[1]);
      await agent.waitFor(/connected to proxy-server/);
      const reply = await new Promise<string>((resolve, reject) => {
        http
          .request({ host: '127.0.0.1', port, method: 'CONNECT', path: echo.address })
          .on('connect', (res, socket) => {
            if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}`));
            socket.once('data', (d) => (resolve(d.toString()), socket.destroy()));
            socket.write('ping');
          })
          .on('error', reject)
          .end();
      });
      expect(reply).toBe('ping');
      agent.kill('SIGTERM');
      expect((await agent.exited).code, agent.stdout() + agent.stderr()).toBe(0);
    } finally {
      agent.kill('SIGKILL');
      await echo.close();
    }
  });
});
