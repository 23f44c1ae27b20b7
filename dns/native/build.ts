// Compiles dns/native/udp-batch.c into build/udp-batch.node (npm's postinstall and the image build run
// it). Node-API is ABI-stable, so any Node's headers will do, including those of the Node running npm.
// Never fails the install: without Linux, a C compiler or the headers, it says so and the DNS server
// uses dgram.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../..');
const output = join(repoRoot, 'build/udp-batch.node');

function headersDir(): string | undefined {
  const candidates = [
    process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, 'include/node'),
    join(dirname(process.execPath), '../include/node'),
    '/usr/local/include/node',
    '/usr/include/node',
  ];
  return candidates.find(
    (dir): dir is string => !!dir && existsSync(join(dir, 'node_api.h')) && existsSync(join(dir, 'uv.h')),
  );
}

function build(): string | undefined {
  if (process.platform !== 'linux') return 'batched UDP needs Linux (recvmmsg/sendmmsg)';
  const headers = headersDir();
  if (!headers) return 'no Node headers found (node_api.h, uv.h); set npm_config_nodedir';
  mkdirSync(dirname(output), { recursive: true });
  const compiler = process.env.CC ?? 'cc';
  try {
    execFileSync(
      compiler,
      [
        '-O2',
        '-fPIC',
        '-shared',
        '-Wall',
        '-Werror',
        `-I${headers}`,
        '-o',
        output,
        join(repoRoot, 'dns/native/udp-batch.c'),
      ],
      { stdio: 'pipe', timeout: 120_000 },
    );
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return `${compiler} failed: ${(e.stderr?.toString() || e.message).trim().slice(0, 800)}`;
  }
  return undefined;
}

const problem = build();
if (problem) console.warn(`spoke-agent: batched UDP for the DNS server not built (${problem}); it will use dgram`);
else console.log(`spoke-agent: built ${output}`);
