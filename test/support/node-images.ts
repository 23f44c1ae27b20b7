// The images the node suite's containerd needs besides the project's own (image.ts), none of which can be
// pulled here: the pod sandbox's pause image, from the pause binary beside the Kubernetes binaries (the
// Kubernetes tree's own pause), and a stand-in for cluster-proxy's
// addon image running cluster-proxy-sidecars.cjs on the distroless stand-in. Built with buildah in the
// cache's storage (containers.ts), labelled with a hash of their inputs and rebuilt only when those change.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine, engineOk } from './containers.js';
import { repoRoot } from './processes.js';
import { baseImages } from './stand-in-images.js';

const label = 'io.spoke-agent.stand-in';

/** What the kubelet's sandboxes run (containerd's sandbox_image). */
const pauseRef = 'registry.k8s.io/pause:3.9';
/** cluster-proxy's addon image as its chart names it with the default tag. */
const clusterProxyRef = 'quay.io/open-cluster-management/cluster-proxy:latest';

const sidecars = fileURLToPath(new URL('./cluster-proxy-sidecars.cjs', import.meta.url));

async function labelled(ref: string): Promise<string | undefined> {
  const r = await engine('podman', ['image', 'inspect', '--format', `{{index .Labels "${label}"}}`, ref]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/** A container from `from`, `files` copied in (path in the image -> file here, mode 0755), committed as `ref`. */
async function commit(
  ref: string,
  from: string,
  files: Record<string, string>,
  config: string[],
  key: string,
): Promise<void> {
  if ((await labelled(ref)) === key) return;
  const ctr = (await engineOk('buildah', ['from', '--pull=never', from])).trim();
  try {
    for (const [to, file] of Object.entries(files)) await engineOk('buildah', ['copy', '--chmod=0755', ctr, file, to]);
    await engineOk('buildah', ['config', ...config, '--label', `${label}=${key}`, ctr]);
    await engineOk('buildah', ['commit', '--quiet', ctr, ref]);
  } finally {
    await engine('buildah', ['rm', ctr]);
  }
}

const hash = (...parts: Array<string | Buffer>) =>
  parts
    .reduce((h, p) => h.update(p), createHash('sha256'))
    .digest('hex')
    .slice(0, 16);

export async function buildPauseImage(pauseBinary: string): Promise<string> {
  await commit(
    pauseRef,
    'scratch',
    { '/pause': pauseBinary },
    ['--entrypoint', '["/pause"]', '--user', '65535:65535'],
    hash(readFileSync(pauseBinary)),
  );
  return pauseRef;
}

/** On the runtime stand-in the Dockerfile names (so it shares its layers with the project's image). */
export async function buildClusterProxyStandIn(): Promise<string> {
  const runtime = baseImages(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')).find(
    (b) => b.kind === 'runtime',
  )!.name;
  const baseId = (await engineOk('podman', ['image', 'inspect', '--format', '{{.Id}}', runtime])).trim();
  await commit(
    clusterProxyRef,
    runtime,
    { '/agent': sidecars, '/cluster-proxy': sidecars },
    ['--entrypoint', '[]', '--user', '65532:65532'],
    hash(readFileSync(sidecars), baseId),
  );
  return clusterProxyRef;
}

/** Saves `refs` as one docker-archive in `dir` (the cluster's folder), for NodeCluster.start to import on every node. */
export async function saveNodeImages(dir: string, refs: readonly string[]): Promise<string[]> {
  const archive = join(dir, 'images.tar');
  await engineOk(
    'podman',
    ['save', '--quiet', '--multi-image-archive', '--format', 'docker-archive', '-o', archive, ...refs],
    { timeoutMs: 600_000 },
  );
  return [archive];
}
