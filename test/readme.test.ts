// README.md's quick start stays true: the two commands are the first two blocks, `npm test` is what
// CI runs, and `npm start` prints lines that work as printed, on a copy of the repository.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyOfRepo, repoRoot, run } from './support/processes.js';

const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const file = (path: string) => readFileSync(join(repoRoot, path), 'utf8');

describe('quick start', () => {
  const blocks = [...readme.matchAll(/```sh\n([^`]*?)\n```/g)].map((m) => m[1]!.trim());

  it('is exactly `npm ci && npm start` and `npm ci && npm test`', () => {
    expect(blocks.slice(0, 2)).toEqual(['npm ci && npm start', 'npm ci && npm test']);
  });

  it('`npm test` is what CI runs after its install (not run here: it would run this suite inside itself)', () => {
    const commands = file('.ci/run')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    const install = commands.findIndex((c) => /^npm ci\b/.test(c));
    expect(install).toBeGreaterThanOrEqual(0);
    expect(commands.slice(install + 1)).toContain('npm test');
    expect((JSON.parse(file('package.json')) as { scripts: Record<string, string> }).scripts.test).toMatch(
      /\bvitest run\b/,
    );
  });

  describe('`npm start` on a copy of the repository', () => {
    // node_modules is linked, not installed (contributing section of the README).
    const copy = copyOfRepo({ linkNodeModules: true });
    const start = run('npm', ['start'], { cwd: copy.dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    afterAll(() => {
      try {
        process.kill(-start.pid, 'SIGKILL'); // npm, sh, tsx, node: whatever is left
      } catch {}
      copy.remove();
    });
    /** A printed command, run as a user pasting it would: by the shell, in the clone. */
    const runPrinted = async (command: string) => {
      const child = run('sh', ['-c', command], { cwd: copy.dir });
      const { code } = await child.exited;
      expect(code, `${command}\n${child.stdout()}${child.stderr()}`).toBe(0);
      return child.stdout();
    };

    it('prints dig, curl and resolve lines that work as printed, then exits 0 on SIGTERM', async () => {
      await start.waitFor(/^ {4}npm start -- resolve .*$/m, 90_000); // the three lines are printed together
      const printed = (command: string) => start.stderr().match(new RegExp(`^ {4}(${command} .*)$`, 'm'))?.[1];
      const [dig, curl, resolve] = [printed('dig'), printed('curl'), printed('npm start -- resolve')];
      expect({ dig, curl, resolve }).toEqual({
        dig: expect.stringMatching(/ demo\.default\.cluster1$/),
        curl: expect.any(String),
        resolve: expect.any(String),
      });

      // The DNS server answers the demo name with the page's loopback address.
      const answer = await runPrinted(dig!);
      expect(answer).toMatch(/status: NOERROR/);
      expect(answer).toMatch(/^demo\.default\.cluster1\.\s+\d+\s+IN\s+A\s+127\.0\.0\.1$/m);
      // Through the hub's HTTP CONNECT port and the tunnel; the agent dials the name.
      expect(await runPrinted(curl!)).toMatch(
        /^Hello from the spoke-agent demo page: you reached demo\.default\.cluster1:\d+ through the hub/,
      );
      // resolve: the answer, and the rule that gave it.
      // (On Linux over the agent's local socket, --debug-socket; elsewhere over its health port.)
      expect(await runPrinted(resolve!)).toMatch(
        /^;; explanation from (the agent's socket @spoke-agent-health-\d+|http:\/\/127\.0\.0\.1:\d+\/debug\/resolve\?name=demo\.default\.cluster1&type=A): rule .*rules\.yaml: static\[0\] \(demo\.default\.cluster1\) \(static\) -> 127\.0\.0\.1$/m,
      );

      // npm itself dies of a signal instead of waiting for its script; the agent is what handles SIGTERM
      // (as PID 1 in the image), and npm start then exits with the agent's code.
      const agentPid = Number(/"pid":(\d+)/.exec(start.stdout())![1]);
      process.kill(agentPid, 'SIGTERM');
      expect((await start.exited).code, start.stdout() + start.stderr()).toBe(0);
      expect(start.stdout()).toMatch(/drained, exiting/);
    }, 180_000);
  });
});
