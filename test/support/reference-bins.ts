// Where tests and the bench find reference binaries built outside this repository (the Go
// apiserver-network-proxy, kube-apiserver, etcd): the folder named by an environment variable, else a
// folder under ~/.cache/spoke-agent once its builder has marked it READY (so a half-written binary is
// never run). Nothing here builds or downloads them.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The default folder for one kind of reference binaries, e.g. `~/.cache/spoke-agent/anp`. */
export const referenceCacheDir = (kind: string): string => join(homedir(), '.cache/spoke-agent', kind);

/**
 * The folder that holds every one of `names`: `$envVar` when set (and only it, so a wrong setting
 * shows up as a skip rather than silently using another build), else `referenceCacheDir(kind)` when
 * it holds READY. Undefined when that folder lacks one of them.
 */
export function referenceBinDir(envVar: string, kind: string, names: readonly string[]): string | undefined {
  const cache = referenceCacheDir(kind);
  const dir = process.env[envVar] || (existsSync(join(cache, 'READY')) ? cache : undefined);
  return dir !== undefined && names.every((name) => existsSync(join(dir, name))) ? dir : undefined;
}

/** Why a test that needs these binaries is skipped, for its note. */
export const missingBinariesNote = (envVar: string, kind: string, names: readonly string[]): string =>
  `skipped: ${names.join(', ')} not found in ${process.env[envVar] ? `${envVar}=${process.env[envVar]}` : `${envVar} (unset) or ${referenceCacheDir(kind)} (with READY)`}`;
