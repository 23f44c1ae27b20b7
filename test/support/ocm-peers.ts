// The peers of the cluster-proxy suite (test/cluster-proxy-e2e.test.ts), built outside this repository
// (CONTRIBUTING.md, "Reference peers"), and the images its cluster runs, none of which can be pulled here:
// - OCM (open-cluster-management-io/ocm): registration-operator, registration, work, placement and the
//   addon manager, each on the distroless stand-in as OCM's Dockerfiles put it (`/<binary>`, uid 10001),
//   tagged with the names clusteradm's operator charts render for the bundle version the suite gives;
// - cluster-proxy's image as cmd/Dockerfile lays it out (ANP v0.36.0 proxy-server, proxy-agent,
//   test-client and test-server, kubectl, cluster-proxy's agent, manager and cluster-proxy binaries);
// - its e2e test binary as test/e2e/Dockerfile packages it (`/e2e`, uid 65532);
// - stand-ins for the e2e's workloads: `quay.io/prometheus/busybox` (Debian's static busybox: sh and
//   httpd) and `alpine/openssl` (that busybox, and this machine's openssl with the libraries it loads).
// Built with buildah in the cache's storage (containers.ts), labelled with a hash of their inputs and
// rebuilt only when those change, as node-images.ts does.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { engine, engineOk } from './containers.js';
import { anpV036BinDir } from './go-proxy-server.js';
import { nodeBinDir } from './node-cluster.js';
import { repoRoot } from './processes.js';
import { missingBinariesNote, referenceBinDir } from './reference-bins.js';
import { baseImages } from './stand-in-images.js';

const label = 'io.spoke-agent.stand-in';

/** OCM's binaries, and clusteradm with the stand-in for `helm template` built from its vendored Helm SDK. */
const ocmFiles = ['registration-operator', 'registration', 'work', 'placement', 'addon', 'clusteradm', 'helm-template'];
/** cluster-proxy's binaries, its e2e test binary, ANP's test-server (its image carries it), its chart and its e2e's env folder. */
const clusterProxyFiles = [
  'cluster-proxy',
  'agent',
  'manager',
  'e2e.test',
  'proxy-test-server',
  'chart/Chart.yaml',
  'e2e-env/job.yaml',
  'e2e-env/hello-world.yaml',
  'e2e-env/hello-world-https.yaml',
  'e2e-env/wait-for-cluster-proxy.sh',
];

/** OCM_BIN_DIR, else ~/.cache/spoke-agent/ocm once it holds READY. */
export const ocmBinDir = () => referenceBinDir('OCM_BIN_DIR', 'ocm', ocmFiles);
/** CLUSTER_PROXY_DIR, else ~/.cache/spoke-agent/cluster-proxy once it holds READY. */
export const clusterProxyDir = () => referenceBinDir('CLUSTER_PROXY_DIR', 'cluster-proxy', clusterProxyFiles);

/** Why the peers are not all here (the first half of the skip note), or undefined. */
export function ocmPeersProblem(): string | undefined {
  if (!ocmBinDir()) return missingBinariesNote('OCM_BIN_DIR', 'ocm', ocmFiles);
  if (!clusterProxyDir()) return missingBinariesNote('CLUSTER_PROXY_DIR', 'cluster-proxy', clusterProxyFiles);
  if (!anpV036BinDir()) return missingBinariesNote('ANP_V036_BIN_DIR', 'anp-v0.36', ['proxy-server', 'proxy-agent']);
  if (!existsSync('/bin/busybox')) return 'skipped: apt-get install busybox-static (the e2e workloads stand-ins)';
  if (!existsSync('/usr/bin/openssl')) return 'skipped: apt-get install openssl';
  return undefined;
}

const hash = (...parts: Array<string | Buffer>) =>
  parts
    .reduce((h, p) => h.update(p), createHash('sha256'))
    .digest('hex')
    .slice(0, 16);

/** A file's identity for the label: its path, size and mtime (hashing hundreds of MB of binaries on every run would cost more than it saves). */
const stamp = (file: string) => {
  const s = statSync(file);
  return `${file}:${s.size}:${s.mtimeMs}`;
};

async function labelled(ref: string): Promise<string | undefined> {
  const r = await engine('podman', ['image', 'inspect', '--format', `{{index .Labels "${label}"}}`, ref]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/** A container from `from`, the folder `root` copied onto its `/`, configured and committed as `ref`, unless an image of that ref and key exists. */
async function commit(ref: string, from: string, root: string, config: string[], key: string): Promise<string> {
  if ((await labelled(ref)) === key) return ref;
  const ctr = (await engineOk('buildah', ['from', '--pull=never', from])).trim();
  try {
    await engineOk('buildah', ['copy', ctr, root, '/'], { timeoutMs: 600_000 });
    await engineOk('buildah', ['config', ...config, '--label', `${label}=${key}`, ctr]);
    await engineOk('buildah', ['commit', '--quiet', ctr, ref], { timeoutMs: 600_000 });
  } finally {
    await engine('buildah', ['rm', ctr]);
  }
  return ref;
}

/** A folder laid out as an image's root: `files` (path in the image -> file here), copied with their modes. */
function layout(files: Record<string, string>, links: Record<string, string> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'spoke-ocm-image-'));
  for (const [to, from] of Object.entries(files)) {
    mkdirSync(join(root, to, '..'), { recursive: true });
    copyFileSync(from, join(root, to));
  }
  for (const [to, target] of Object.entries(links)) {
    mkdirSync(join(root, to, '..'), { recursive: true });
    symlinkSync(target, join(root, to));
  }
  return root;
}

async function runtimeBase(): Promise<{ name: string; id: string }> {
  const name = baseImages(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')).find((b) => b.kind === 'runtime')!.name;
  return { name, id: (await engineOk('podman', ['image', 'inspect', '--format', '{{.Id}}', name])).trim() };
}

async function image(
  ref: string,
  from: { name: string; id: string } | 'scratch',
  files: Record<string, string>,
  config: string[],
  links: Record<string, string> = {},
): Promise<string> {
  const key = hash(
    from === 'scratch' ? 'scratch' : from.id,
    ...Object.entries(files).map(([to, f]) => `${to}=${stamp(f)}`),
    JSON.stringify(links),
    JSON.stringify(config),
  );
  if ((await labelled(ref)) === key) return ref;
  const root = layout(files, links);
  try {
    return await commit(ref, from === 'scratch' ? 'scratch' : from.name, root, config, key);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** The registry and names clusteradm's charts give OCM's images. */
const ocmRegistry = 'quay.io/open-cluster-management';
/** cluster-proxy's image as its chart names it for `--set tag=...` (the manager's built-in agent image name says the same tag). */
export const clusterProxyImageRepo = `${ocmRegistry}/cluster-proxy`;
export const clusterProxyTag = 'e2e';
/** The e2e test image as test/e2e/env/job.yaml names it (imagePullPolicy Never). */
const e2eImageRef = `${ocmRegistry}/cluster-proxy-e2e:latest`;

/** Every image the cluster-proxy suite's cluster runs but the project's own and pause: their refs. */
export async function buildOcmImages(ocmTag: string): Promise<string[]> {
  const ocm = ocmBinDir()!;
  const cp = clusterProxyDir()!;
  const anp = anpV036BinDir()!;
  const runtime = await runtimeBase();
  const refs: string[] = [];
  // OCM's Dockerfiles (build/Dockerfile.*): the binary at /, USER 10001.
  const ocmImages: Record<string, string> = {
    'registration-operator': 'registration-operator',
    registration: 'registration',
    work: 'work',
    placement: 'placement',
    'addon-manager': 'addon',
  };
  for (const [name, binary] of Object.entries(ocmImages))
    refs.push(
      await image(`${ocmRegistry}/${name}:${ocmTag}`, runtime, { [`/${binary}`]: join(ocm, binary) }, [
        '--entrypoint',
        '[]',
        '--user',
        '10001',
      ]),
    );
  // The e2e workloads' and alpine's shell: Debian's static busybox, its applets linked as the commands they are.
  const applets = ['sh', 'echo', 'mkdir', 'httpd', 'cat', 'ls'];
  const busyboxLinks = Object.fromEntries(applets.map((a) => [`/bin/${a}`, 'busybox']));
  // cluster-proxy's cmd/Dockerfile: on alpine (its busybox here: the e2e execs `/bin/sh -c 'echo hello'` in
  // the manager's container), kubectl (v1.28 here, v1.30.2 there), ANP v0.36.0's four binaries, its own three; USER 65532.
  refs.push(
    await image(
      `${clusterProxyImageRepo}:${clusterProxyTag}`,
      runtime,
      {
        '/bin/busybox': '/bin/busybox',
        '/kubectl': join(nodeBinDir()!, 'kubectl'),
        '/proxy-server': join(anp, 'proxy-server'),
        '/proxy-agent': join(anp, 'proxy-agent'),
        '/proxy-test-client': join(anp, 'proxy-test-client'),
        '/proxy-test-server': join(cp, 'proxy-test-server'),
        '/agent': join(cp, 'agent'),
        '/manager': join(cp, 'manager'),
        '/cluster-proxy': join(cp, 'cluster-proxy'),
      },
      ['--entrypoint', '[]', '--user', '65532:65532'],
      busyboxLinks,
    ),
  );
  refs.push(
    await image(e2eImageRef, runtime, { '/e2e': join(cp, 'e2e.test') }, [
      '--entrypoint',
      '["/e2e"]',
      '--user',
      '65532:65532',
    ]),
  );
  // The workloads' stand-ins: the commands their pods run (sh, echo, mkdir, httpd; openssl req and s_server).
  refs.push(
    await image(
      'quay.io/prometheus/busybox:latest',
      'scratch',
      { '/bin/busybox': '/bin/busybox' },
      ['--cmd', '["sh"]', '--env', 'PATH=/bin'],
      busyboxLinks,
    ),
  );
  const openssl = '/usr/bin/openssl';
  const libraries = Object.fromEntries(
    execFileSync('ldd', [openssl], { encoding: 'utf8' })
      .split('\n')
      .map((l) => /=>\s+(\/\S+)/.exec(l)?.[1])
      .filter((p): p is string => Boolean(p) && /lib(ssl|crypto|z)\b/.test(basename(p!)))
      .map((p) => [p, p]),
  );
  refs.push(
    await image(
      'docker.io/alpine/openssl:latest',
      runtime,
      {
        '/bin/busybox': '/bin/busybox',
        '/usr/bin/openssl': openssl,
        '/usr/lib/ssl/openssl.cnf': '/usr/lib/ssl/openssl.cnf',
        ...libraries,
      },
      ['--entrypoint', '["openssl"]', '--env', 'PATH=/usr/bin:/bin'],
      busyboxLinks,
    ),
  );
  return refs;
}
