// A real kube-apiserver and etcd on loopback, for tests that must meet the real API (RBAC,
// TokenReview, SubjectAccessReview, the aggregation layer; an audit log of the SubjectAccessReviews
// shows what a reviewer sent). The binaries are not part of the project:
// they are found in KUBE_BIN_DIR, else ~/.cache/spoke-agent/kube once it holds READY
// (reference-bins.ts), built as README.md says; tests skip with a note where they are absent.
// Everything listens on 127.0.0.1 with ephemeral ports (the API server on another loopback address and
// port when asked, e.g. :443 as kubernetes.default.svc); the PKI is generated into a temporary folder.
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { createCa, type Ca } from '../../hub/ephemeral-pki.js';
import { runToEnd } from './commands.js';
import { run, terminate, type Child } from './processes.js';
import { missingBinariesNote, referenceBinDir } from './reference-bins.js';
import { unusedPort } from './targets.js';
import { waitUntilAsync } from './wait.js';

const binaries = ['kube-apiserver', 'etcd'];
const kubeBinDir = referenceBinDir('KUBE_BIN_DIR', 'kube', binaries);

/** Why the binaries cannot be used here (the skip note), or undefined when they can. */
export const kubeBinariesMissing = (): string | undefined =>
  kubeBinDir ? undefined : missingBinariesNote('KUBE_BIN_DIR', 'kube', binaries);

/** Static-token users: name -> [token, groups]. */
const users: Record<string, [string, string[]]> = {
  admin: ['admin-token', ['system:masters']],
  alice: ['alice-token', []],
  bob: ['bob-token', []],
  carol: ['carol-token', []],
  dave: ['dave-token', []],
  'system:serviceaccount:spoke-agent:spoke-agent': [
    'spoke-agent-token',
    ['system:serviceaccounts', 'system:serviceaccounts:spoke-agent'],
  ],
};
export type KubeUser = keyof typeof users;

export interface KubeApiServer {
  url: string;
  dir: string;
  /** The CA of the API server's serving certificate (PEM). */
  servingCa: Ca;
  /** The CA the API server trusts for x509 users (--client-ca-file). */
  clientCa: Ca;
  /** The front-proxy CA (--requestheader-client-ca-file). */
  frontProxyCa: Ca;
  token(user: KubeUser): string;
  /** A kubeconfig file that authenticates as `user`. */
  kubeconfig(user: KubeUser): string;
  /** Runs kubectl as `user`; resolves with its output and exit code. */
  kubectl(user: KubeUser, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }>;
  /** kubectl as `user` left running (e.g. `get --watch`), with its output as it comes. */
  kubectlProcess(user: KubeUser, args: string[]): Child;
  /**
   * The audit log's events so far (audit.k8s.io/v1 Event objects): every SubjectAccessReview, at
   * level Request, so a test sees what a reviewer sent (user, UID, groups, attributes).
   */
  auditEvents(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

// Only SubjectAccessReviews, with their request body: what an extension server asked.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    resources: [{ group: authorization.k8s.io, resources: [subjectaccessreviews] }]
  - level: None
`;

const write = (dir: string, name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text, { mode: 0o600 });
  return path;
};

async function stop(child: Child | undefined): Promise<void> {
  if (child) await terminate(child, child.exited, 5000);
}

function get(url: string, ca: string, token: string): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get(
      url,
      { ca, headers: { authorization: `Bearer ${token}` }, agent: false, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
  });
}

/** `at`: where the API server listens (default 127.0.0.1, a free port); its address is in its certificate. */
export async function startKubeApiServer(at: { host?: string; port?: number } = {}): Promise<KubeApiServer> {
  if (!kubeBinDir) throw new Error(kubeBinariesMissing());
  const dir = mkdtempSync(join(tmpdir(), 'spoke-kube-'));
  const host = at.host ?? '127.0.0.1';
  const [etcdPort, peerPort, port] = [await unusedPort(), await unusedPort(), at.port ?? (await unusedPort())];
  const servingCa = createCa('kube-serving-ca');
  const clientCa = createCa('kube-client-ca');
  const frontProxyCa = createCa('kube-front-proxy-ca');
  const serving = servingCa.issue('kube-apiserver', {
    serverNames: [
      ...new Set([host, '127.0.0.1', 'localhost', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']),
    ],
  });
  const proxyClient = frontProxyCa.issue('front-proxy-client', { client: true });
  const saKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  const file = (name: string, text: string) => write(dir, name, text);
  const tokens = Object.entries(users).map(
    ([name, [token, groups]]) => `${token},${name},uid-${token}${groups.length ? `,"${groups.join(',')}"` : ''}`,
  );
  const url = `https://${host}:${port}`;

  let etcd: Child | undefined;
  let apiserver: Child | undefined;
  const close = async () => {
    await stop(apiserver);
    await stop(etcd);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const peer = `http://127.0.0.1:${peerPort}`;
    const client = `http://127.0.0.1:${etcdPort}`;
    etcd = run(join(kubeBinDir, 'etcd'), [
      '--name=test',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=test=${peer}`,
    ]);
    await etcd.waitFor(/ready to serve client requests/, 30_000);
    apiserver = run(join(kubeBinDir, 'kube-apiserver'), [
      `--bind-address=${host}`,
      `--advertise-address=${host}`,
      `--secure-port=${port}`,
      `--etcd-servers=${client}`,
      `--tls-cert-file=${file('apiserver.crt', serving.cert)}`,
      `--tls-private-key-file=${file('apiserver.key', serving.key)}`,
      `--client-ca-file=${file('client-ca.crt', clientCa.cert)}`,
      `--token-auth-file=${file('tokens.csv', `${tokens.join('\n')}\n`)}`,
      '--authorization-mode=Node,RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${file('sa.key', saKey)}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.96.0.0/16',
      '--disable-admission-plugins=ServiceAccount',
      '--endpoint-reconciler-type=none',
      `--requestheader-client-ca-file=${file('front-proxy-ca.crt', frontProxyCa.cert)}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${file('front-proxy-client.crt', proxyClient.cert)}`,
      `--proxy-client-key-file=${file('front-proxy-client.key', proxyClient.key)}`,
      `--audit-policy-file=${file('audit-policy.yaml', auditPolicy)}`,
      `--audit-log-path=${join(dir, 'audit.log')}`,
    ]);
    const server = apiserver;
    let exited = false;
    void server.exited.then(() => {
      exited = true;
    });
    await waitUntilAsync(
      async () => {
        if (exited) throw new Error(`kube-apiserver exited:\n${server.stderr().slice(-3000)}`);
        return (await get(`${url}/readyz`, servingCa.cert, users.admin![0])) === 200;
      },
      60_000,
      () => `kube-apiserver to be ready:\n${server.stderr().slice(-3000)}`,
      250,
    );
  } catch (err) {
    await close();
    throw err;
  }

  const caFile = file('serving-ca.crt', servingCa.cert);
  const kubeconfig = (user: KubeUser) =>
    file(
      `${user.replace(/:/g, '-')}.kubeconfig`,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: test, cluster: {server: "${url}", certificate-authority: "${caFile}"}}]`,
        `users: [{name: "${user}", user: {token: ${users[user]![0]}}}]`,
        `contexts: [{name: test, context: {cluster: test, user: "${user}"}}]`,
        'current-context: test',
        '',
      ].join('\n'),
    );
  const kubectl = (user: KubeUser, args: string[], input?: string) =>
    runToEnd('kubectl', [`--kubeconfig=${kubeconfig(user)}`, ...args], { timeoutMs: 30_000, input });
  const kubectlProcess = (user: KubeUser, args: string[]) =>
    run('kubectl', [`--kubeconfig=${kubeconfig(user)}`, ...args]);
  const auditEvents = () => {
    const path = join(dir, 'audit.log');
    if (!existsSync(path)) return [];
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  };
  return {
    url,
    dir,
    servingCa,
    clientCa,
    frontProxyCa,
    token: (user) => users[user]![0],
    kubeconfig,
    kubectl,
    kubectlProcess,
    auditEvents,
    close,
  };
}
