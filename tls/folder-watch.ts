// Wakes the agent when its TLS material may have changed on disk, instead of looking every second: an
// inotify watch on each folder that holds the CA, certificate or key. A Secret volume's update swaps a
// `..data` symlink in that folder; an edit in place changes the file; either is an event there. The
// agent then compares the files' fingerprint (credentials.ts TlsFingerprint) and replaces its streams
// only if it changed. Where a folder cannot be watched (no inotify, its limit reached) the caller polls.
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { type Clock, systemClock } from '../clock/clock.js';

export interface CredentialWatch {
  /** False when some folder could not be watched: the caller looks for changes itself. */
  readonly complete: boolean;
  close(): void;
}

/** Calls `onChange` (at most every `settleMs`, so a multi-file update is seen once) after anything changes in the files' folders. */
export function watchCredentialFolders(
  paths: readonly string[],
  onChange: () => void,
  clock: Clock = systemClock,
  settleMs = 100,
): CredentialWatch {
  const watchers: FSWatcher[] = [];
  /** Cancels the pending call; set while one is due. */
  let cancel: (() => void) | undefined;
  let complete = true;
  const changed = () => {
    if (cancel) return;
    cancel = clock.after(settleMs, () => {
      cancel = undefined;
      onChange();
    });
  };
  for (const folder of new Set(paths.filter(Boolean).map((p) => dirname(p)))) {
    try {
      const watcher = watch(folder, { persistent: false }, changed);
      watcher.on('error', () => (complete = false));
      watchers.push(watcher);
    } catch {
      complete = false;
    }
  }
  return {
    get complete() {
      return complete;
    },
    close: () => {
      cancel?.();
      for (const w of watchers) w.close();
    },
  };
}
