// OCM and cluster-proxy installed on the node cluster (node-cluster.ts) as cluster-proxy's own e2e
// installs them (its Makefile's setup-env-for-e2e and deploy-cluster-proxy-e2e targets, test/e2e/env/init.sh),
// and its e2e suite run as its Makefile's run-e2e-job does: a Job from test/e2e/env/job.yaml. Every
// command runs in the cluster's network namespace (node-cluster.ts `exec`), with no proxy variable in
// its environment, against the cluster's own API server: nothing here reaches outside.
// Where offline forces a deviation from those scripts, the smallest one (test/README.md lists them):
// the chart rendered by a stand-in for `helm template` (Helm's SDK) and applied with kubectl rather than
// `helm install`; no Dex (the OIDC specs are left out); images from the cache, not a registry.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Result } from './commands.js';
import type { NodeCluster } from './node-cluster.js';
import { clusterProxyDir, clusterProxyImageRepo, clusterProxyTag, ocmBinDir } from './ocm-peers.js';
import { waitUntilAsync } from './wait.js';

/** The namespaces cluster-proxy's e2e names: the hub's addon namespace, and the agent's on the managed cluster. */
export const hubNamespace = 'open-cluster-management-addon';
export const agentNamespace = 'open-cluster-management-cluster-proxy';
export const managedCluster = 'loopback';

/** `env -u` for every proxy variable: what the cluster's commands run with. */
const noProxy = [
  'env',
  ...[
    'HTTP_PROXY',
    'HTTPS_PROXY',
    'NO_PROXY',
    'http_proxy',
    'https_proxy',
    'no_proxy',
    'ALL_PROXY',
    'all_proxy',
  ].flatMap((v) => ['-u', v]),
];

export interface E2eSpec {
  /** The spec's full text, as ginkgo reports it. */
  name: string;
  state: 'passed' | 'failed' | 'skipped';
  /** The failure, for a failed spec. */
  message?: string;
}

export interface E2eRun {
  specs: E2eSpec[];
  /** The Job's whole log. */
  log: string;
  seconds: number;
}

export class OcmHub {
  private readonly work = mkdtempSync(join(tmpdir(), 'spoke-ocm-'));

  constructor(
    readonly cluster: NodeCluster,
    /** The OCM image tag the bundle names (clusteradm's --bundle-version-overrides). */
    private readonly ocmTag: string,
  ) {}

  private run(argv: string[], timeoutMs = 600_000): Promise<Result> {
    return this.cluster.exec([...noProxy, ...argv], { timeoutMs });
  }

  private async ok(argv: string[], timeoutMs = 600_000): Promise<string> {
    const r = await this.run(argv, timeoutMs);
    if (r.code !== 0)
      throw new Error(
        `${argv.join(' ')} (exit ${r.code}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}${this.cluster.diagnostics()}`,
      );
    return r.stdout;
  }

  private clusteradm(args: string[], timeoutMs = 600_000): Promise<string> {
    return this.ok(
      [join(ocmBinDir()!, 'clusteradm'), `--kubeconfig=${this.cluster.kubeconfigs.admin}`, ...args],
      timeoutMs,
    );
  }

  kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    return this.cluster.kubectlOk(args, opts);
  }

  /** Steps 1-3 of test/e2e/env/init.sh: the hub, the same cluster joined as `loopback`, accepted and available. */
  async installOcm(): Promise<void> {
    await this.kubectl(['create', 'namespace', hubNamespace]);
    const bundle = join(this.work, 'bundle.json');
    writeFileSync(bundle, JSON.stringify({ ocm: this.ocmTag }));
    const joinFile = join(this.work, 'join.sh');
    await this.clusteradm(
      ['init', '--output-join-command-file', joinFile, '--wait', `--bundle-version-overrides=${bundle}`],
      900_000,
    );
    await this.kubectl(
      [
        '-n',
        'open-cluster-management-hub',
        'rollout',
        'status',
        'deployment/cluster-manager-placement-controller',
        '--timeout=300s',
      ],
      { timeoutMs: 310_000 },
    );
    // The join command init wrote (`clusteradm join --hub-token T --hub-apiserver URL --wait --cluster-name $1`), run
    // as init.sh runs it: `sh -c "$(cat join.sh) loopback --force-internal-endpoint-lookup"`, where $1 is empty.
    const joinArgs = readFileSync(joinFile, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((a) => a !== '$1');
    if (!/(^|\/)clusteradm$/.test(joinArgs[0] ?? '') || joinArgs[1] !== 'join')
      throw new Error(`the join command: ${joinArgs.join(' ')}`);
    await this.clusteradm(
      [
        ...joinArgs.slice(1),
        managedCluster,
        '--force-internal-endpoint-lookup',
        `--bundle-version-overrides=${bundle}`,
      ],
      900_000,
    );
    await waitUntilAsync(
      async () =>
        (
          await this.cluster.kubectl([
            'get',
            'csr',
            '-l',
            `open-cluster-management.io/cluster-name=${managedCluster}`,
            '-o',
            'name',
          ])
        ).stdout.trim() !== '',
      300_000,
      `the klusterlet's CSR for ${managedCluster}${this.cluster.diagnostics()}`,
      1000,
    );
    await this.clusteradm(['accept', '--clusters', managedCluster, '--wait'], 300_000);
    await this.kubectl(
      [
        'wait',
        '--for=condition=ManagedClusterConditionAvailable',
        `managedcluster/${managedCluster}`,
        '--timeout=300s',
      ],
      {
        timeoutMs: 310_000,
      },
    );
  }

  private env(file: string): string {
    return join(clusterProxyDir()!, 'e2e-env', file);
  }

  /** Steps 4-5 of init.sh: the hello-world workloads (their images are the stand-ins of ocm-peers.ts). */
  async installWorkloads(): Promise<void> {
    await this.kubectl(['apply', '-f', this.env('hello-world.yaml')]);
    await this.kubectl(['wait', '--for=condition=ready', 'pod/hello-world', '-n', 'default', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
    await this.kubectl(['apply', '-f', this.env('hello-world-https.yaml')]);
    await this.kubectl(['wait', '--for=condition=ready', 'pod/hello-world-https', '-n', 'default', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
  }

  /** The Makefile's deploy-cluster-proxy-e2e values, as `--set` arguments, plus `extra`. */
  static chartValues(extra: string[] = []): string[] {
    const values = [
      'registry=quay.io/open-cluster-management',
      'image=cluster-proxy',
      `tag=${clusterProxyTag}`,
      `proxyServerImage=${clusterProxyImageRepo}`,
      `proxyAgentImage=${clusterProxyImageRepo}`,
      `proxyServer.entrypointAddress=proxy-entrypoint.${hubNamespace}.svc`,
      'proxyServer.port=8091',
      'enableServiceProxy=true',
      'userServer.enabled=true',
      'exposedServices[0].namespace=default',
      'exposedServices[0].service=hello-world',
      'exposedServices[0].port=8000',
      'exposedServices[0].protocol=http',
      'exposedServices[1].namespace=default',
      'exposedServices[1].service=hello-world-https',
      'exposedServices[1].port=8443',
      'exposedServices[1].protocol=https',
      ...extra,
    ];
    return values.flatMap((v) => ['--set', v]);
  }

  /** `helm template` of the chart with those values (the stand-in built from Helm's SDK): the manifests `helm install` would apply. */
  async renderChart(extra: string[] = []): Promise<string> {
    return this.ok([
      join(ocmBinDir()!, 'helm-template'),
      'cluster-proxy',
      join(clusterProxyDir()!, 'chart'),
      hubNamespace,
      ...OcmHub.chartValues(extra),
    ]);
  }

  /** `helm install cluster-proxy charts/cluster-proxy -n open-cluster-management-addon` as the Makefile runs it: CRDs first, as Helm applies them, then the rest. */
  async installClusterProxy(extra: string[] = []): Promise<void> {
    const docs = (await this.renderChart(extra)).split(/^---\s*$/m).filter((d) => /^kind:/m.test(d));
    const crds = docs.filter((d) => /^kind: CustomResourceDefinition$/m.test(d));
    const rest = docs.filter((d) => !crds.includes(d));
    await this.kubectl(['apply', '-f', '-'], { input: crds.join('\n---\n') });
    await this.kubectl(['wait', '--for=condition=Established', 'crd', '--all', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
    await this.kubectl(['apply', '-n', hubNamespace, '-f', '-'], { input: rest.join('\n---\n') });
  }

  /** test/e2e/env/wait-for-cluster-proxy.sh, the Makefile's wait-cluster-proxy-e2e, run as it is. */
  async waitForClusterProxy(timeoutSeconds = 600): Promise<void> {
    await this.ok(
      [
        'env',
        `KUBECONFIG=${this.cluster.kubeconfigs.admin}`,
        `PATH=${this.cluster.binDir}:/usr/bin:/bin`,
        'bash',
        this.env('wait-for-cluster-proxy.sh'),
        String(timeoutSeconds),
      ],
      (timeoutSeconds + 30) * 1000,
    );
  }

  /**
   * The Makefile's run-e2e-job: test/e2e/env/job.yaml with LABEL_FILTER set (its sed), applied, waited for
   * (wait-for-job.sh's 1200 s), its log read. The one change: a JUnit report written to the log (ginkgo's
   * `--ginkgo.junit-report=/dev/stdout`), so each spec's outcome is read rather than guessed from its text.
   */
  async runE2e(labelFilter: string): Promise<E2eRun> {
    const started = Date.now();
    // The e2e's TLS specs make the manager and the user-server exit on purpose (a TLS ConfigMap change) four
    // times a run; the kubelet's crash back-off for them (up to 5 min) would carry into the next run and
    // stall its TLS specs. Fresh pods, as a fresh install has, then the Makefile's readiness wait.
    const hubDeployments = ['deployment/cluster-proxy-addon-manager', 'deployment/cluster-proxy-addon-user'];
    await this.kubectl(['-n', hubNamespace, 'rollout', 'restart', ...hubDeployments]);
    for (const d of hubDeployments)
      await this.kubectl(['-n', hubNamespace, 'rollout', 'status', d, '--timeout=300s'], { timeoutMs: 310_000 });
    await this.waitForClusterProxy();
    await this.cluster.kubectl(
      ['delete', 'job', 'cluster-proxy-e2e', '-n', hubNamespace, '--ignore-not-found', '--wait=true'],
      {
        timeoutMs: 120_000,
      },
    );
    const job = readFileSync(this.env('job.yaml'), 'utf8')
      .replace(/(name: LABEL_FILTER\s*\n\s*value: )""/, `$1"${labelFilter}"`)
      .replace(/( +)- -ginkgo\.v\n/, '$1- -ginkgo.v\n$1- --ginkgo.junit-report=/dev/stdout\n');
    if (!job.includes(`"${labelFilter}"`) || !job.includes('junit-report'))
      throw new Error('test/e2e/env/job.yaml no longer has the shape the suite edits');
    await this.kubectl(['apply', '-f', '-'], { input: job });
    // The first pod that ends is the run (the Job's backoffLimit would start a second after a failed spec).
    let ended = '';
    await waitUntilAsync(
      async () => {
        const r = await this.cluster.kubectl([
          '-n',
          hubNamespace,
          'get',
          'pods',
          '-l',
          'app=cluster-proxy-e2e',
          '-o',
          'jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\\n"}{end}',
        ]);
        ended =
          r.stdout
            .split('\n')
            .map((l) => l.split(' '))
            .find(([, phase]) => phase === 'Succeeded' || phase === 'Failed')?.[0] ?? '';
        return ended !== '';
      },
      1_200_000,
      "the e2e Job's pod to end",
      2000,
    );
    const log = await this.kubectl(['-n', hubNamespace, 'logs', ended], { timeoutMs: 60_000 });
    await this.cluster.kubectl(['delete', 'job', 'cluster-proxy-e2e', '-n', hubNamespace, '--wait=false']);
    return { specs: parseJunit(log), log, seconds: Math.round((Date.now() - started) / 1000) };
  }

  close(): void {
    rmSync(this.work, { recursive: true, force: true });
  }
}

const xmlText = (s: string) =>
  s.replace(/&(lt|gt|quot|apos|amp|#(\d+));/g, (_, e: string, n?: string) =>
    n
      ? String.fromCharCode(Number(n))
      : ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' } as Record<string, string>)[e]!,
  );

/** Each `<testcase>` of ginkgo's JUnit report in `log`: its name and outcome (the suite's Before/AfterSuite entries included). */
function parseJunit(log: string): E2eSpec[] {
  const report = /<testsuites[\s\S]*<\/testsuites>/.exec(log)?.[0];
  if (!report) throw new Error(`no JUnit report in the e2e Job's log:\n${log.slice(-4000)}`);
  const specs: E2eSpec[] = [];
  for (const m of report.matchAll(/<testcase\s+name="([^"]*)"[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[3] ?? '';
    const failure = /<(failure|error)\s+message="([^"]*)"/.exec(body);
    specs.push({
      name: xmlText(m[1]!),
      state: failure ? 'failed' : /<skipped/.test(body) ? 'skipped' : 'passed',
      ...(failure ? { message: xmlText(failure[2]!) } : {}),
    });
  }
  return specs;
}
