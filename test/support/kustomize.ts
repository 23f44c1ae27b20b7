// manifests/ rendered by the real `kubectl kustomize`, alone or with one of its components (as
// `components: [components/NAME]` in its kustomization.yaml would render it).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from './processes.js';

// biome-ignore lint/suspicious/noExplicitAny: rendered Kubernetes objects are plain data, read by path
export type Obj = Record<string, any>;

export const manifestsDir = join(repoRoot, 'manifests');

export function render(dir: string): Obj[] {
  return parseAllDocuments(
    execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
  )
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
}

/**
 * The base with the components in `manifests/<name>`, in that order, as a user's overlay includes them. Kustomize
 * wants relative paths and refuses an overlay inside the base's folder, so it lives in a temporary one.
 */
export function renderWithComponent(...names: string[]): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-kustomize-'));
  const base = relative(dir, manifestsDir);
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    `resources:\n  - ${base}\ncomponents:\n${names.map((name) => `  - ${posix.join(base, name)}\n`).join('')}`,
  );
  try {
    return render(dir);
  } finally {
    rmSync(dir, { recursive: true });
  }
}
