// The project's image, built from its Dockerfile, unchanged, by buildah (`buildah bud --pull=never`)
// on the stand-in bases of stand-in-images.ts, in the cache's storage (containers.ts). Used by
// test/image.test.ts and by the node suite, which imports the same image into containerd.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { engineOk, withCacheLock } from './containers.js';
import { repoRoot } from './processes.js';
import { ensureStandIns, type StandIns } from './stand-in-images.js';

const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** What manifests/ name the image (`spoke-agent:<version>`), as containerd and buildah normalize it. */
const imageRef = `docker.io/library/spoke-agent:${version}`;

export interface BuiltImage {
  ref: string;
  id: string;
  /** Uncompressed size of the image, and of the runtime base it is built on. */
  sizeBytes: number;
  baseSizeBytes: number;
  /** The time of `buildah bud` alone (layers cached from an earlier build are reused). */
  buildMs: number;
  standIns: StandIns;
}

const size = async (ref: string) =>
  Number((await engineOk('podman', ['image', 'inspect', '--format', '{{.Size}}', ref])).trim());

let building: Promise<BuiltImage> | undefined;

/** Builds the image once per process (a first run on a new machine: the stand-ins, a few minutes). */
export function buildImage(): Promise<BuiltImage> {
  building ??= build();
  return building;
}

async function build(): Promise<BuiltImage> {
  const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
  const standIns = await ensureStandIns(dockerfile);
  // One build at a time (the image test and the node suite run in parallel workers): the second reuses the first's layers.
  const buildMs = await withCacheLock('image-build', 1_800_000, async () => {
    const started = Date.now();
    // --network host: the build stage's `npm ci` reaches the npm registry as this machine does.
    await engineOk(
      'buildah',
      [
        'bud',
        '--pull=never',
        '--network',
        'host',
        '--layers',
        '--quiet',
        '-t',
        imageRef,
        '-f',
        join(repoRoot, 'Dockerfile'),
        repoRoot,
      ],
      { timeoutMs: 1_200_000 },
    );
    const ms = Date.now() - started;
    // Earlier builds' untagged images and layer caches older than a few days go; recent ones stay for the next build.
    await engineOk('podman', ['image', 'prune', '--force', '--filter', 'until=72h']).catch(() => undefined);
    return ms;
  });
  const id = (await engineOk('podman', ['image', 'inspect', '--format', '{{.Id}}', imageRef])).trim();
  const runtime = standIns.bases.find((b) => b.kind === 'runtime')!;
  return {
    ref: imageRef,
    id,
    sizeBytes: await size(imageRef),
    baseSizeBytes: await size(runtime.name),
    buildMs,
    standIns,
  };
}

export const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
