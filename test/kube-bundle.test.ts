// The Kubernetes client as the image ships it (dist/, cmd/bundle-plugins.ts): client-node's KubeConfig
// with its rarely used parts in chunks of their own. The built agent reads a kubeconfig (js-yaml, loaded
// on demand) and reaches the API server through the HTTP proxy the kubeconfig names (hpagent, loaded on
// demand), against a fake API server over TLS on loopback.
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePki, type TestPki } from './support/certs.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { buildDist, run, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';

let pki: TestPki;
let api: FakeApiServer;
let proxy: http.Server;
const connects: string[] = [];
const tunnels = new Set<net.Socket>();
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  pki = makePki();
  const [cert, key] = pki.issue('kube-apiserver', { serverNames: ['127.0.0.1'] });
  api = await FakeApiServer.start({ tls: { cert: readFileSync(cert), key: readFileSync(key) } });
  api.configMap('spoke', 'rules', { 'rules.yaml': 'static: [{name: db.cluster1, target: 127.0.0.1}]' });
  // An HTTP CONNECT proxy, as a kubeconfig's proxy-url names one.
  proxy = http.createServer();
  proxy.on('connect', (req: http.IncomingMessage, client: net.Socket) => {
    connects.push(req.url ?? '');
    const [host, port] = (req.url ?? '').split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client).pipe(upstream);
    });
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      tunnels.add(a);
      a.on('error', () => b.destroy()).on('close', () => {
        b.destroy();
        tunnels.delete(a);
      });
    }
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  cleanups.push(
    () => api.close(),
    () => new Promise((r) => proxy.close(r)),
    () => {
      for (const s of tunnels) s.destroy();
    },
  );
}, 120_000);

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function metrics(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined))?.text() ?? '';
}

describe('the bundled Kubernetes client', () => {
  it('reads a kubeconfig and watches the rules ConfigMap through the proxy it names', async () => {
    const entry = buildDist();
    const kubeconfig = join(pki.dir, 'proxied-kubeconfig');
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    // prettier-ignore
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: c',
        `clusters: [{name: c, cluster: {server: "${api.url}", certificate-authority: "${pki.caCert}", proxy-url: "${proxyUrl}"}}]`,
        `users: [{name: u, user: {token: "${api.token}"}}]`,
        'contexts: [{name: c, context: {cluster: c, user: u}}]',
        '',
      ].join('\n'),
    );
    const health = await unusedPort();
    // prettier-ignore
    const agent: Child = run(process.execPath, [
      entry,
      '--cluster-name=cluster1',
      '--dns-port=0',
      '--dns-forward=false',
      `--kubeconfig=${kubeconfig}`,
      '--rules-configmap=spoke/rules',
      '--health-server-host=127.0.0.1',
      `--health-server-port=${health}`,
      '--log-level=warn',
    ]);
    cleanups.push(async () => {
      agent.kill('SIGKILL');
      await agent.exited;
    });
    await waitUntilAsync(
      async () => /spoke_agent_kube_watch_synced\{resource="configmap"\} 1/.test(await metrics(health)),
      30_000,
      `the ConfigMap watch through the proxy\n${agent.stdout()}${agent.stderr()}`,
    );
    expect(connects).toContain(new URL(api.url).host);
    await waitUntilAsync(
      async () => api.requests.some((r) => r.includes('/configmaps') && r.includes('watch=true')),
      10_000,
      'the watch after the list',
    );
    const rules = await (await fetch(`http://127.0.0.1:${health}/debug/rules`)).text();
    expect(rules).toContain('db.cluster1');
  }, 120_000);
});
