// The real entry point (cmd/main.ts) end to end: the agent with its local hub, then `spoke-agent dial`
// through both of the hub's frontends, as a user would run them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCommandFlags } from '../cmd/agent-command.js';
import { dialFlags } from '../cmd/dial-command.js';
import { runCli, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';
import { startEchoServer, type Target } from './support/targets.js';

let agent: Child;
let echo: Target;
let ports: { grpc: number; httpConnect: number };

beforeAll(async () => {
  echo = await startEchoServer();
  agent = runCli(['--health-server-port=0']);
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
    const dial = runCli(['dial', `--mode=${mode}`, '--proxy-host=127.0.0.1', `--proxy-port=${port}`, '--close-on-eof', echo.address]);
    dial.write('ping\n');
    await expect.poll(() => dial.stdout(), { timeout: 20_000 }).toBe('ping\n');
    dial.end();
    expect((await dial.exited).code, dial.stderr()).toBe(0);
  });

  it.each(['grpc', 'http-connect'] as const)('--mode=%s to a closed port exits 1 with the error the hub relays', async (mode) => {
    const target = `127.0.0.1:${await unusedPort()}`;
    const port = mode === 'grpc' ? ports.grpc : ports.httpConnect;
    const dial = runCli(['dial', `--mode=${mode}`, '--proxy-host=127.0.0.1', `--proxy-port=${port}`, target]);
    dial.end();
    expect((await dial.exited).code).toBe(1);
    expect(dial.stderr()).toMatch(new RegExp(`^spoke-agent dial: failed to dial ${target} through 127.0.0.1:${port}: .*connection refused`, 'm'));
    expect(dial.stdout()).toBe('');
  });
});

describe('spoke-agent on SIGTERM', () => {
  it('drains and exits 0', async () => {
    agent.kill('SIGTERM');
    expect((await agent.exited).code, agent.stdout()).toBe(0);
    expect(agent.stdout()).toMatch(/drained, exiting/);
  });
});
