// The real entry point (cmd/main.ts) end to end: the agent with its local hub, then `spoke-agent dial`
// through both of the hub's frontends, as a user would run them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCommandFlags } from '../cmd/agent-command.js';
import { dialFlags } from '../cmd/dial-command.js';
import { lineThroughDial, repoRoot, run, runCli, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';
import { startEchoServer, type Target } from './support/targets.js';

let agent: Child;
let echo: Target;
let ports: { grpc: number; httpConnect: number };

beforeAll(async () => {
  echo = await startEchoServer();
  agent = runCli(['--cluster-name=', '--health-server-port=0']); // --cluster-name= : the local hub alone, without npm start's demo
  const m = await agent.waitFor(/gRPC frontend (\d+), HTTP CONNECT (\d+)/);
  ports = { grpc: Number(m[1]), httpConnect: Number(m[2]) };
  await agent.waitFor(/connected to proxy-server/);
}, 60_000);

afterAll(async () => {
  agent?.kill('SIGKILL');
  await echo?.close();
});

describe('spoke-agent --help', () => {
  it('lists every agent flag and exits 0', async () => {
    const help = runCli(['--help']);
    expect((await help.exited).code).toBe(0);
    for (const f of Object.values(agentCommandFlags)) expect(help.stdout()).toContain(`--${f.name}`);
  });

  it('dial --help lists the dial flags and exits 0', async () => {
    const help = runCli(['dial', '--help']);
    expect((await help.exited).code).toBe(0);
    for (const f of Object.values(dialFlags)) expect(help.stdout() + help.stderr()).toContain(`--${f.name}`);
  });
});

describe('spoke-agent dial through the local hub of `spoke-agent`', () => {
  it.each(['grpc', 'http-connect'] as const)('--mode=%s reaches an echo server and exits 0', async (mode) => {
    const port = mode === 'grpc' ? ports.grpc : ports.httpConnect;
    const r = await lineThroughDial([`--mode=${mode}`, '--proxy-host=127.0.0.1', `--proxy-port=${port}`], echo.address);
    expect(r.stdout, r.stderr).toBe('ping\n');
    expect(r.code, r.stderr).toBe(0);
  });

  it.each(['grpc', 'http-connect'] as const)(
    '--mode=%s to a closed port exits 1 with the error the hub relays',
    async (mode) => {
      const target = `127.0.0.1:${await unusedPort()}`;
      const port = mode === 'grpc' ? ports.grpc : ports.httpConnect;
      const dial = runCli(['dial', `--mode=${mode}`, '--proxy-host=127.0.0.1', `--proxy-port=${port}`, target]);
      dial.end();
      expect((await dial.exited).code).toBe(1);
      expect(dial.stderr()).toMatch(
        new RegExp(`^spoke-agent dial: failed to dial ${target} through 127.0.0.1:${port}: .*connection refused`, 'm'),
      );
      expect(dial.stdout()).toBe('');
    },
  );
});

describe('spoke-agent without rules (--cluster-name=)', () => {
  it("prints a curl line that reaches the agent's health port through the tunnel", async () => {
    const [, line] = await agent.waitFor(/^ {2}(curl -p -x .*\/readyz)$/m);
    const curl = run('sh', ['-c', line!]);
    expect((await curl.exited).code, curl.stderr()).toBe(0);
    expect(curl.stdout()).toBe('ok');
  });

  it('answers /debug/resolve and /debug/rules with how to set rules', async () => {
    const [, port] = await agent.waitFor(/"port":(\d+),"msg":"health server listening/);
    for (const path of ['/debug/resolve?name=demo.default.cluster1', '/debug/rules']) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: string }).error).toMatch(
        /^no rules: .*Set --cluster-name=NAME .*--expose=NAMESPACE\/SERVICE, --rules-file=PATH/,
      );
    }
  });
});

describe('--log-format', () => {
  const dnsArgs = [
    'dns',
    '--cluster-name=cluster1',
    '--dns-port=0',
    '--health-server-host=127.0.0.1',
    '--health-server-port=0',
    '--dns-upstream=127.0.0.1:9',
  ];
  const textLine =
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matches the ANSI colour escapes (ESC [) of the text log
    /^(\x1b\[2m)?\d\d:\d\d:\d\d\.\d{3}(\x1b\[0m)? (\x1b\[32m)?INFO (\x1b\[0m)? DNS server listening .*port=/m;

  it('text: one readable line per entry, no colours into a pipe', async () => {
    const dns = runCli([...dnsArgs, '--log-format=text']);
    try {
      const [line] = await dns.waitFor(textLine);
      expect(line).not.toContain('\x1b');
      expect(dns.stdout()).not.toContain('{"level"');
    } finally {
      dns.kill('SIGKILL');
    }
  });

  // On a terminal (a pty from util-linux's `script`), auto is text, coloured unless NO_COLOR is set.
  it.each([
    ['', true],
    ['1', false],
  ])('auto on a terminal, NO_COLOR=%j: text, coloured: %s', async (noColor, coloured) => {
    const command = [process.execPath, '--import', 'tsx', 'cmd/main.ts', ...dnsArgs].map((a) => `'${a}'`).join(' ');
    // The shell prints the agent's pid: it runs in the pty's own session, out of reach of a group kill.
    const pty = run('script', ['-qec', `${command} & echo "child=$!"; wait`, '/dev/null'], {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: noColor },
    });
    const [, child] = await pty.waitFor(/child=(\d+)/);
    try {
      const [line] = await pty.waitFor(textLine);
      expect(line.includes('\x1b[32mINFO')).toBe(coloured);
    } finally {
      process.kill(Number(child), 'SIGKILL');
      await pty.exited;
    }
  });
});

describe('spoke-agent on SIGTERM', () => {
  it('drains and exits 0', async () => {
    agent.kill('SIGTERM');
    expect((await agent.exited).code, agent.stdout()).toBe(0);
    expect(agent.stdout()).toMatch(/drained, exiting/);
  });
});
