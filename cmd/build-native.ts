// Compiles the Node-API helpers into build/ (npm's postinstall and the image build run it): the DNS
// server's batched UDP (dns/native/udp-batch.c), and the TCP options Node has no call for
// (net/native/tcp-options.c: TCP_USER_TIMEOUT on the connections to the proxy-servers, SO_RCVBUF on
// the target connections). Node-API is ABI-stable, so any Node's headers will
// do, including those of the Node running npm. Never fails the install: without Linux, a C compiler or
// the headers, it says so, and the DNS server uses dgram, the agent keepalive probes alone.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

const helpers = [
  { source: 'dns/native/udp-batch.c', name: 'udp-batch', without: 'the DNS server will use dgram' },
  {
    source: 'net/native/tcp-options.c',
    name: 'tcp-options',
    without:
      'the agent will find a dead connection to a proxy-server by keepalive probes alone, and leave target receive buffers to the kernel',
  },
];

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

function build(source: string, output: string): string | undefined {
  if (process.platform !== 'linux') return 'it needs Linux';
  const headers = headersDir();
  if (!headers) return 'no Node headers found (node_api.h, uv.h); set npm_config_nodedir';
  mkdirSync(dirname(output), { recursive: true });
  const compiler = process.env.CC ?? 'cc';
  try {
    execFileSync(
      compiler,
      ['-O2', '-fPIC', '-shared', '-Wall', '-Werror', `-I${headers}`, '-o', output, join(repoRoot, source)],
      { stdio: 'pipe', timeout: 120_000 },
    );
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return `${compiler} failed: ${(e.stderr?.toString() || e.message).trim().slice(0, 800)}`;
  }
  return undefined;
}

for (const { source, name, without } of helpers) {
  const output = join(repoRoot, `build/${name}.node`);
  const problem = build(source, output);
  if (problem) console.warn(`spoke-agent: ${source} not built (${problem}); ${without}`);
  else console.log(`spoke-agent: built ${output}`);
}
