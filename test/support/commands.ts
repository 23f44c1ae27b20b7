// Whether a command is on PATH, for test support that installs or skips on its absence.
import { execFileSync } from 'node:child_process';

export function hasCommand(tool: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
