// Commands that test support runs: whether one is on PATH, and running one to its end for its output.
import { execFile, execFileSync } from 'node:child_process';

export function hasCommand(tool: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command` with `input` on stdin; resolves with its output and exit code (1 when it could not run or timed out), never rejects. */
export function runToEnd(
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<Result> {
  return new Promise((resolve) => {
    const child = execFile(
      command,
      args,
      { env: opts.env, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr: stderr || (err && code === 1 ? err.message : '') });
      },
    );
    // A command that exits without reading its input (or before reading all of it) makes the write fail
    // with EPIPE; its exit code and output say what happened, so the write's error is not one.
    child.stdin!.on('error', () => {});
    child.stdin!.end(opts.input ?? '');
  });
}
