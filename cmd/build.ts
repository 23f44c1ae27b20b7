// `npm run build`: type-checks, then bundles the agent into dist/ (what the image and the bench run):
// dist/cmd/main.js and its lazily imported chunks in dist/chunks/, the .proto files in dist/proto/.
// One bundle instead of ~300 modules loaded one by one costs less memory (bench/README.md, "Idle
// footprint"). Identifiers are kept: stack traces stay readable without source maps, which cost RSS.
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { deferClientNodeExtras, httpWithoutUndici } from './bundle-plugins.js';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const dist = join(repoRoot, 'dist');

execFileSync(
  process.execPath,
  [join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--noEmit'],
  { cwd: repoRoot, stdio: 'inherit' },
);
rmSync(dist, { recursive: true, force: true });
await build({
  absWorkingDir: repoRoot,
  entryPoints: ['cmd/main.ts'],
  outbase: '.',
  outdir: 'dist',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  minifyWhitespace: true,
  minifySyntax: true,
  // Everything but the DNS server's native helper (found at run time in build/): the image needs no
  // node_modules, and @kubernetes/client-node bundled costs 13 MiB less RSS than loaded from there.
  external: ['*.node'],
  // The CommonJS dependencies (grpc-js, pino, prom-client) call require() for Node's modules.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  plugins: [deferClientNodeExtras(join(repoRoot, 'kube/deferred-modules.ts')), httpWithoutUndici()],
  logLevel: 'warning',
});
cpSync(join(repoRoot, 'proto'), join(dist, 'proto'), { recursive: true, filter: (f) => !f.endsWith('.ts') });
