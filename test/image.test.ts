// The image, built by a real engine from the Dockerfile as it is: buildah (`bud --pull=never`) on
// stand-in bases that test support makes from Debian packages and the npm registry's Node and tags with
// the Dockerfile's FROM names (test/support/stand-in-images.ts), then run with podman (runc) as a user
// relies on it: no shell, uid 65532, a read-only root (no tmpfs anywhere, as readOnlyRootFilesystem),
// /proxy-agent for cluster-proxy, --help, and the agent itself tunnelling through a hub on this
// machine's loopback, in a bare container without /etc/resolv.conf. Prints the build time and the size.
// Needs buildah, podman, runc and debootstrap (.ci/run installs them) and root; skipped with a note elsewhere.
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProxyHub } from '../hub/proxy-server.js';
import { makePki, hubTls } from './support/certs.js';
import { engine, engineEnv, engineProblem } from './support/containers.js';
import { buildImage, megabytes, type BuiltImage } from './support/image.js';
import { run } from './support/processes.js';
import { skipNote } from './support/skips.js';
import { startEchoServer, unusedPort, type Target } from './support/targets.js';

const problem = engineProblem();
if (problem) skipNote('image', problem);

let image: BuiltImage;

/** `podman run` of the image as the DaemonSet runs it: read-only root without tmpfs mounts, no network unless asked. */
const podmanRun = (args: string[], opts: { network?: 'host' | 'none'; entrypoint?: string; extra?: string[] } = {}) => [
  'run',
  '--rm',
  '--read-only',
  '--read-only-tmpfs=false',
  `--network=${opts.network ?? 'none'}`,
  ...(opts.entrypoint ? [`--entrypoint=${opts.entrypoint}`] : []),
  ...(opts.extra ?? []),
  image.ref,
  ...args,
];
const inImage = (args: string[], opts: Parameters<typeof podmanRun>[1] = {}) => engine('podman', podmanRun(args, opts));
const nodeInImage = (script: string) => inImage(['-e', script], { entrypoint: '/nodejs/bin/node' });

describe.skipIf(problem)('the image, built from the Dockerfile by buildah and run by podman', () => {
  beforeAll(async () => {
    image = await buildImage();
    const standIns = image.standIns.built.length
      ? `stand-ins ${image.standIns.built.join(', ')} built in ${(image.standIns.ms / 1000).toFixed(0)} s`
      : 'stand-in bases cached';
    console.log(
      `image ${image.ref}: ${megabytes(image.sizeBytes)} (the distroless stand-in base ${megabytes(image.baseSizeBytes)}, the Dockerfile's layers ${megabytes(image.sizeBytes - image.baseSizeBytes)}); ` +
        `buildah bud ${(image.buildMs / 1000).toFixed(1)} s (${standIns})`,
    );
  }, 2_400_000);

  it("is configured to run the agent as 65532:65532, and the Dockerfile's layers add little to the base", async () => {
    const r = await engine('podman', ['image', 'inspect', '--format', '{{json .Config}}', image.ref]);
    const config = JSON.parse(r.stdout) as { User: string; Entrypoint: string[] };
    expect(config.User).toBe('65532:65532');
    expect(config.Entrypoint).toEqual(['/nodejs/bin/node', '/app/dist/cmd/main.js']);
    // The bundle, the helper and package.json: a node_modules or a build tree slipping in would show here.
    expect(image.sizeBytes - image.baseSizeBytes).toBeLessThan(25e6);
  });

  it('runs as uid 65532 with no shell and a read-only root, shipping the bundle and the helper but no node_modules', async () => {
    const r = await nodeInImage(`
      const fs = require('fs');
      let write = 'written';
      try { fs.writeFileSync('/app/probe', 'x'); } catch (e) { write = e.code; }
      console.log(JSON.stringify({
        uid: process.getuid(), gid: process.getgid(), write,
        shells: ['/bin/sh', '/usr/bin/sh', '/bin/bash', '/bin/busybox', '/bin/dash'].filter((p) => fs.existsSync(p)),
        files: ['/app/dist/cmd/main.js', '/app/dist/proto/agent.proto', '/app/build/udp-batch.node', '/app/build/tcp-options.node', '/app/node_modules', '/proxy-agent'].filter((p) => fs.existsSync(p)),
      }));`);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      uid: 65532,
      gid: 65532,
      write: 'EROFS',
      shells: [],
      files: [
        '/app/dist/cmd/main.js',
        '/app/dist/proto/agent.proto',
        '/app/build/udp-batch.node',
        '/app/build/tcp-options.node',
        '/proxy-agent',
      ],
    });
    const shell = await inImage(['-c', 'true'], { entrypoint: '/bin/sh' });
    expect(shell.code).not.toBe(0);
    expect(shell.stderr).toMatch(/\/bin\/sh.*no such file or directory/);
  });

  it('the entrypoint answers --help, dns --help and dial --help with exit 0', async () => {
    for (const args of [['--help'], ['dns', '--help'], ['dial', '--help']]) {
      const r = await inImage(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/^Usage: spoke-agent/);
    }
  });

  it("/proxy-agent (what cluster-proxy runs) starts the same agent, with no shell: --help, the Go agent's flags, its flag errors", async () => {
    const help = await inImage(['--help'], { entrypoint: '/proxy-agent' });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^Usage: spoke-agent \[flags\]/);
    for (const flag of [
      '--proxy-server-host',
      '--agent-identifiers',
      '--ca-cert',
      '--agent-cert',
      '--agent-key',
      '--cluster-name',
    ])
      expect(help.stdout).toContain(flag);
    const bad = await inImage(['--agent-identifiers=bogus=1'], { entrypoint: '/proxy-agent' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown address type: bogus/);
  });

  describe('the agent in a bare container (no /etc/resolv.conf), against a hub on loopback', () => {
    let hub: ProxyHub;
    let echo: Target;
    let creds: string;
    const name = `spoke-agent-image-test-${process.pid}`;

    beforeAll(async () => {
      const pki = makePki();
      // The container's user reads the hub credentials from a read-only mount (a Secret's 0440 and fsGroup in a pod).
      creds = mkdtempSync(join(tmpdir(), 'spoke-image-creds-'));
      for (const [from, to] of [
        [pki.caCert, 'ca.crt'],
        [pki.clientCert, 'tls.crt'],
        [pki.clientKey, 'tls.key'],
      ] as const) {
        copyFileSync(from, join(creds, to));
        chmodSync(join(creds, to), 0o644);
      }
      chmodSync(creds, 0o755);
      const tls = hubTls(pki);
      hub = await ProxyHub.start({
        agentPort: 0,
        serverPort: null,
        httpConnectPort: 0,
        proxyStrategies: ['destHost'],
        agentTls: tls,
      });
      echo = await startEchoServer();
    });

    afterAll(async () => {
      await engine('podman', ['rm', '--force', '--time=0', name]);
      await hub?.close();
      await echo?.close();
      if (creds) rmSync(creds, { recursive: true, force: true });
    });

    it('starts with forwarding off (said in the log), connects with mTLS, tunnels a connection, and exits 0 on SIGTERM', async () => {
      const [health, dns] = [await unusedPort(), await unusedPort()];
      // prettier-ignore
      const args = [
        '--proxy-server-host=localhost',
        `--proxy-server-port=${hub.ports.agent}`,
        '--ca-cert=/etc/spoke-agent/hub/ca.crt',
        '--agent-cert=/etc/spoke-agent/hub/tls.crt',
        '--agent-key=/etc/spoke-agent/hub/tls.key',
        '--agent-identifiers=host=127.0.0.1',
        '--cluster-name=cluster1',
        '--allowed-cidrs=127.0.0.0/8',
        '--rules-configmap=',
        `--dns-port=${dns}`,
        `--health-server-port=${health}`,
        '--health-server-host=127.0.0.1',
        '--log-format=json',
      ];
      // --dns=none: podman writes no /etc/resolv.conf (the host's network, so the test reaches the agent on loopback).
      const agent = run(
        'podman',
        podmanRun(args, {
          network: 'host',
          extra: [`--name=${name}`, '--dns=none', `--volume=${creds}:/etc/spoke-agent/hub:ro`],
        }),
        { env: engineEnv() },
      );
      try {
        await agent.waitFor(/"msg":"connected to proxy-server"/, 60_000);
        expect(agent.stdout()).toMatch(
          /"reason":"no --dns-upstream and \/etc\/resolv.conf is unreadable: ENOENT[^"]*".*"msg":"no DNS upstream: forwarding is off/,
        );
        expect(agent.stdout()).toMatch(/"udp":"batched".*"forward":false.*"msg":"DNS server listening/);
        // The TCP_USER_TIMEOUT helper loads in the runtime image (else the agent warns at start).
        expect(agent.stdout()).not.toMatch(/--tcp-user-timeout is not in force/);
        const reply = await new Promise<string>((resolve, reject) => {
          http
            .request({ host: '127.0.0.1', port: hub.ports.httpConnect, method: 'CONNECT', path: echo.address })
            .on('connect', (res, socket) => {
              if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}:\n${agent.stdout()}`));
              socket.once('data', (d) => {
                resolve(d.toString());
                socket.destroy();
              });
              socket.write('ping');
            })
            .on('error', reject)
            .end();
        });
        expect(reply).toBe('ping');
        const stop = await engine('podman', ['stop', '--time=20', name]);
        expect(stop.code, stop.stderr).toBe(0);
        const exit = await agent.exited;
        expect(exit.code, agent.stdout() + agent.stderr()).toBe(0);
        expect(agent.stdout()).toMatch(/"msg":"drained, exiting"/);
      } finally {
        agent.kill('SIGKILL');
      }
    });
  });
});
