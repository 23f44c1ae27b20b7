// A Kubernetes v1.28 cluster of one or two nodes inside private network + mount namespaces, for the node
// suites (test/node.test.ts, one node; test/nodes.test.ts, two, with kube-apiserver's egress through
// the hub). The team's recipe for this machine kind (CONTRIBUTING.md) in code:
// - one holder process (`unshare -n -m sleep infinity`) owns the namespaces; every component runs in
//   them through nsenter. Inside: lo, the node IP on a veth pair whose both ends stay inside (no
//   `dummy` module here), a default route onto it where nothing answers, so nothing leaves; tmpfs on
//   /run (containerd's shim sockets, /run/netns), /var/lib (kubelet, libcni's cache) and /var/log
//   (kubelet's /var/log/pods), all of them paths the components hard-code.
// - A second node gets network and mount namespaces of its own, made inside the first's: the veth
//   peer moves there with the node's IP (the link between the nodes), its own tmpfs mounts, its own
//   containerd, kubelet (its own cgroup root) and kube-proxy; each node's pod subnet is routed to it.
//   With `egress`, each kubelet's port rejects what comes over that link: only its own node reaches it.
// - Debian's containerd (CRI, runc, cgroupfs, restrict_oom_score_adj: the kubelet's -998 would fail
//   every sandbox here), CNI bridge and host-local, iptables, conntrack; dnsmasq stands in for cluster
//   DNS, fed from a watch of Services, behind a selectorless kube-system/kube-dns Service at clusterDNS.
// - The Kubernetes binaries from the reference cache (KUBE_NODE_BIN_DIR, else ~/.cache/spoke-agent/node
//   with READY): etcd, kube-apiserver (RBAC, Node authorizer, aggregation layer, static tokens for test
//   users), kube-controller-manager, kube-scheduler, kube-proxy (iptables), kubelet, kubectl.
// - Every process, the pods' included, lives in one cgroup tree of its own, so teardown (also of a run
//   that crashed: its state file says what to kill) is "kill the tree": the namespaces, their mounts,
//   pod network namespaces and iptables rules go with their last process. The test talks to the
//   cluster only through nsenter'd children (kubectl, dig) and Unix sockets in its own folder.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import {
  type Dirent,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCa, type Ca, type CertAndKey } from '../../hub/ephemeral-pki.js';
import { hasCommand, runToEnd, type Result } from './commands.js';
import { engineProblem } from './containers.js';
import { anpV036BinDir } from './go-proxy-server.js';
import { run, type Child } from './processes.js';
import { missingBinariesNote, referenceBinDir } from './reference-bins.js';
import { waitUntil, waitUntilAsync } from './wait.js';

/** A node: its name, its address (on the link between the nodes' namespaces) and its pods' subnet. */
export interface ClusterNode {
  name: string;
  ip: string;
  podCidr: string;
}
/** The nodes a cluster can have; the first also runs the control plane, cluster DNS and the hub. */
export const clusterNodes: readonly ClusterNode[] = [
  { name: 'node1', ip: '10.200.0.10', podCidr: '10.244.0.0/24' },
  { name: 'node2', ip: '10.200.0.11', podCidr: '10.244.1.0/24' },
];
export const nodeIp = clusterNodes[0]!.ip;
export const nodeName = clusterNodes[0]!.name;
const clusterDnsIp = '10.96.0.10';
const clusterCidr = '10.244.0.0/16';
const serviceCidr = '10.96.0.0/16';
/** The hub's agent endpoint as the manifests name it; the cluster's DNS answers it with the node IP. */
export const hubHost = 'proxy-entrypoint.hub.example';
const hubAgentPort = 8091;

const nodeBinaries = [
  'kubelet',
  'kube-proxy',
  'kube-scheduler',
  'kube-controller-manager',
  'kubectl',
  'pause',
  'kube-apiserver',
  'etcd',
] as const;
/** Where the Kubernetes binaries are: KUBE_NODE_BIN_DIR, else ~/.cache/spoke-agent/node once it holds READY. */
export const nodeBinDir = () => referenceBinDir('KUBE_NODE_BIN_DIR', 'node', nodeBinaries);
/** Commands (or files) the cluster needs, each with its Debian package. */
const packages: Array<[string, string]> = [
  ['containerd', 'containerd'],
  ['runc', 'runc'],
  ['dnsmasq', 'dnsmasq-base'],
  ['iptables', 'iptables'],
  ['conntrack', 'conntrack'],
  ['/usr/lib/cni/bridge', 'containernetworking-plugins'],
  ['nsenter', 'util-linux'],
  ['ip', 'iproute2'],
  ['dig', 'dnsutils'],
];

/** Why the cluster cannot run here (the skip note), or undefined when it can. */
export function nodeClusterProblem(): string | undefined {
  if (process.platform !== 'linux') return 'skipped: needs Linux (namespaces, cgroups)';
  if (process.getuid?.() !== 0) return 'skipped: not root (network and mount namespaces, cgroups, a kubelet)';
  if (!nodeBinDir()) return missingBinariesNote('KUBE_NODE_BIN_DIR', 'node', nodeBinaries);
  if (!anpV036BinDir()) return missingBinariesNote('ANP_V036_BIN_DIR', 'anp-v0.36', ['proxy-server']);
  const missing = packages
    .filter(([what]) => (what.startsWith('/') ? !existsSync(what) : !hasCommand(what)))
    .map(([, pkg]) => pkg);
  if (missing.length) return `skipped: apt-get install ${[...new Set(missing)].join(' ')}`;
  const engine = engineProblem();
  if (engine) return `${engine} (the node suite imports the image test's image)`;
  try {
    execFileSync('unshare', ['-n', '-m', '--propagation', 'private', 'true'], { stdio: 'pipe' });
  } catch (err) {
    return `skipped: unshare -n -m fails here: ${(err as Error).message.split('\n')[0]}`;
  }
  return undefined;
}

// ---- the cgroup tree that holds every process of a cluster ----------------------------------------

const cgroupRoot = '/sys/fs/cgroup';
const stateFile = '/run/spoke-agent/node-cluster.json';

interface State {
  owner: number;
  cgroup: string;
  dir: string;
}

/** The hierarchies mounted under /sys/fs/cgroup: each v1 one (the kubelet's cgroupfs driver uses them), and the hybrid layout's cgroup2 one (runc uses it too). */
function hierarchies(): string[] {
  return readdirSync(cgroupRoot).filter((d) => existsSync(join(cgroupRoot, d, 'cgroup.procs')));
}

/** Below this process's own memory cgroup (a sandbox's limit keeps counting the pods), the same path in every hierarchy. */
function cgroupPath(): string {
  const own = /^\d+:memory:(\S+)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1] ?? '/';
  return join(own, 'spoke-agent-node');
}

function createCgroup(path: string): void {
  for (const h of hierarchies()) {
    let dir = join(cgroupRoot, h);
    for (const part of path.split('/').filter(Boolean)) {
      const parent = dir;
      dir = join(dir, part);
      if (!existsSync(dir)) mkdirSync(dir);
      // A new cpuset has no CPUs or memory nodes until given its parent's.
      if (h === 'cpuset')
        for (const f of ['cpuset.cpus', 'cpuset.mems'])
          if (readFileSync(join(dir, f), 'utf8').trim() === '')
            writeFileSync(join(dir, f), readFileSync(join(parent, f)));
    }
  }
}

function cgroupDirs(path: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // removed meanwhile
      throw err;
    }
    for (const e of entries) if (e.isDirectory()) walk(join(dir, e.name));
    out.push(dir);
  };
  for (const h of hierarchies()) walk(join(cgroupRoot, h, path));
  return out; // deepest first
}

/** The processes in the tree; a cgroup removed meanwhile (containerd removes a pod's as its processes die) holds none. */
const pidsIn = (path: string) =>
  cgroupDirs(path).flatMap((d) => {
    try {
      return readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  });

/** Kills every process in the tree, then removes it. */
async function destroyCgroup(path: string): Promise<void> {
  let pids: number[] = [];
  /** True once no process is left; else sends the rest `signal`. */
  const goneOr = (signal: NodeJS.Signals): boolean => {
    pids = [...new Set(pidsIn(path))];
    for (const pid of pids) {
      try {
        process.kill(pid, signal);
      } catch {
        // gone already
      }
    }
    return pids.length === 0;
  };
  // SIGTERM once, a second for it to work, then SIGKILL to whatever is left until none is.
  if (!goneOr('SIGTERM')) {
    const terminated = () => pidsIn(path).length === 0;
    await waitUntil(terminated, 1000, 'SIGTERM').catch(() => {});
    await waitUntilAsync(
      async () => goneOr('SIGKILL'),
      29_000,
      () => `processes ${pids.join(' ')} in ${path} to die of SIGKILL`,
      100,
    );
  }
  for (const dir of cgroupDirs(path)) {
    try {
      rmdirSync(dir);
    } catch {
      // a hierarchy's cgroup that is already gone
    }
  }
}

/**
 * Takes the machine's one cluster slot (node.test.ts and nodes.test.ts run in parallel workers, and two
 * clusters would share the node addresses): the state file, created exclusively. A slot whose owner is
 * dead (a crashed run) is cleared; one whose owner is alive is waited for, until it removes the file.
 */
async function takeClusterSlot(state: State): Promise<void> {
  mkdirSync(join(stateFile, '..'), { recursive: true });
  let held: State | undefined;
  const take = async (): Promise<boolean> => {
    try {
      writeFileSync(stateFile, JSON.stringify(state), { flag: 'wx' });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    held = undefined;
    try {
      held = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
    } catch {
      // written or removed just now: look again
    }
    if (!held || isAlive(held.owner)) return false;
    await destroyCgroup(held.cgroup);
    rmSync(held.dir, { recursive: true, force: true });
    rmSync(stateFile, { force: true });
    return take();
  };
  await waitUntilAsync(
    take,
    30 * 60_000,
    () => `another node suite (pid ${held?.owner}) to end its cluster on this machine (${stateFile})`,
    1000,
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// ---- PKI and configuration files ------------------------------------------------------------------

interface Pki {
  serving: Ca;
  client: Ca;
  frontProxy: Ca;
  files: Record<string, string>;
}

/** Static-token users for RBAC scenarios (no groups: only what is bound to them by name). */
const tokenUsers = { alice: 'alice-token', bob: 'bob-token' } as const;
type TokenUser = keyof typeof tokenUsers;

function writePki(dir: string, nodes: readonly ClusterNode[]): Pki {
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };
  const pair = (name: string, p: CertAndKey) => ({
    [`${name}.crt`]: file(`${name}.crt`, p.cert),
    [`${name}.key`]: file(`${name}.key`, p.key),
  });
  const serving = createCa('node-serving-ca');
  const client = createCa('node-client-ca');
  const frontProxy = createCa('node-front-proxy-ca');
  const saKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  const names = [
    nodeIp,
    '10.96.0.1',
    '127.0.0.1',
    'localhost',
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
  ];
  const files: Record<string, string> = {
    'serving-ca.crt': file('serving-ca.crt', serving.cert),
    'client-ca.crt': file('client-ca.crt', client.cert),
    'client-ca.key': file('client-ca.key', client.key),
    'front-proxy-ca.crt': file('front-proxy-ca.crt', frontProxy.cert),
    'sa.key': file('sa.key', saKey),
    ...pair('apiserver', serving.issue('kube-apiserver', { serverNames: names })),
    ...Object.assign(
      {},
      ...nodes.map((n) => pair(`kubelet-serving-${n.name}`, serving.issue(n.name, { serverNames: [n.ip, n.name] }))),
    ),
    ...pair('front-proxy-client', frontProxy.issue('front-proxy-client', { client: true })),
    ...pair(
      'apiserver-kubelet-client',
      client.issue('kube-apiserver-kubelet-client', { client: true, organizations: ['system:masters'] }),
    ),
    ...pair('admin', client.issue('admin', { client: true, organizations: ['system:masters'] })),
    ...Object.assign(
      {},
      ...nodes.map((n) =>
        pair(
          `kubelet-${n.name}`,
          client.issue(`system:node:${n.name}`, { client: true, organizations: ['system:nodes'] }),
        ),
      ),
    ),
    ...pair('controller-manager', client.issue('system:kube-controller-manager', { client: true })),
    ...pair('scheduler', client.issue('system:kube-scheduler', { client: true })),
    ...pair('kube-proxy', client.issue('system:kube-proxy', { client: true })),
    'tokens.csv': file(
      'tokens.csv',
      `${Object.entries(tokenUsers)
        .map(([user, token]) => `${token},${user},uid-${user}`)
        .join('\n')}\n`,
    ),
  };
  return { serving, client, frontProxy, files };
}

function kubeconfig(dir: string, name: string, user: { cert: string; key: string } | { token: string }): string {
  const path = join(dir, `${name}.kubeconfig`);
  const auth =
    'token' in user ? `token: ${user.token}` : `client-certificate: ${user.cert}\n    client-key: ${user.key}`;
  writeFileSync(
    path,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: node\n  cluster:\n    server: https://${nodeIp}:6443\n    certificate-authority: ${join(dir, 'serving-ca.crt')}\n` +
      `users:\n- name: ${name}\n  user:\n    ${auth}\ncontexts:\n- name: node\n  context: {cluster: node, user: ${name}}\ncurrent-context: node\n`,
    { mode: 0o600 },
  );
  return path;
}

// ---- the cluster -----------------------------------------------------------------------------------

export interface NodeClusterOptions {
  /** How many of clusterNodes, each a kubelet, containerd and kube-proxy in network and mount namespaces of its own (default 1). */
  nodes?: number;
  /**
   * kube-apiserver's egress selection `cluster` (kubelets, pods, Services) through the hub's Unix
   * socket (startHub), as konnectivity runs it; and each kubelet's port reachable from its own node
   * only (its pods and itself), so a request routed through another node's agent fails.
   */
  egress?: boolean;
}

export class NodeCluster {
  private readonly children: Child[] = [];
  /** The holder process of each node's namespaces after the first (whose holder is `holder`). */
  private readonly holders: Child[] = [];
  /** Each component's output so far, by name. */
  readonly components = new Map<string, Child>();
  private hubChild?: Child;
  private servicesWatch?: ChildProcess;
  private stopped = false;
  /** From the call to start to a Ready node. */
  nodeReadyMs = 0;
  readonly binDir = nodeBinDir()!;
  readonly kubeconfigs: { admin: string } & Record<TokenUser, string>;

  private constructor(
    readonly dir: string,
    private readonly cgroup: string,
    private readonly holder: Child,
    readonly pki: Pki,
    readonly nodes: readonly ClusterNode[],
    private readonly egress: boolean,
  ) {
    this.kubeconfigs = {
      admin: kubeconfig(dir, 'admin', { cert: pki.files['admin.crt']!, key: pki.files['admin.key']! }),
      alice: kubeconfig(dir, 'alice', { token: tokenUsers.alice }),
      bob: kubeconfig(dir, 'bob', { token: tokenUsers.bob }),
    };
  }

  /** A node's own folder (the first node's is the cluster's, as it always was). */
  private nodeDir(node: ClusterNode): string {
    return node === this.nodes[0] ? this.dir : join(this.dir, node.name);
  }

  /** containerd's socket of a node, on this machine's file system (ctr reaches it without nsenter). */
  containerdSocket(node: ClusterNode = this.nodes[0]!): string {
    return join(this.nodeDir(node), 'containerd.sock');
  }

  /** The hub's Unix socket (its gRPC frontend): kube-apiserver's egress with `egress`, and the tests'. */
  get hubSocket(): string {
    return join(this.dir, 'hub.sock');
  }

  /** `images(dir)`: docker-archive tarballs (written into `dir`, the cluster's folder) imported into containerd before the kubelet starts, the pause image among them. */
  static async start(images: (dir: string) => Promise<string[]>, opts: NodeClusterOptions = {}): Promise<NodeCluster> {
    const nodes = clusterNodes.slice(0, opts.nodes ?? 1);
    const dir = mkdtempSync(join(tmpdir(), 'spoke-node-'));
    const cgroup = cgroupPath();
    await takeClusterSlot({ owner: process.pid, cgroup, dir });
    const started = Date.now();
    createCgroup(cgroup);
    let cluster: NodeCluster | undefined;
    try {
      writeFileSync(join(dir, 'resolv.conf'), '');
      const holder = run('sh', [
        '-c',
        `${joinCgroup(cgroup)} exec unshare -n -m --propagation private sh -c '${holderScript}' '${dir}'`,
      ]);
      await holder.waitFor(/^holder ready$/m, 30_000);
      cluster = new NodeCluster(dir, cgroup, holder, writePki(dir, nodes), nodes, opts.egress ?? false);
      await cluster.linkNodes();
      await cluster.boot(images);
      cluster.nodeReadyMs = Date.now() - started;
      return cluster;
    } catch (err) {
      if (cluster) await cluster.close();
      else
        await destroyCgroup(cgroup).finally(() => {
          rmSync(dir, { recursive: true, force: true });
          rmSync(stateFile, { force: true });
        });
      throw err;
    }
  }

  /** [command, args] that run `argv` in a node's network namespace (and mount namespace with `mounts`); the first node's by default. */
  private enter(argv: string[], mounts = false, node: ClusterNode = this.nodes[0]!): [string, string[]] {
    const holder = node === this.nodes[0] ? this.holder : this.holders[this.nodes.indexOf(node) - 1]!;
    return ['nsenter', ['-t', String(holder.pid), '-n', ...(mounts ? ['-m'] : []), '--', ...argv]];
  }

  /**
   * The namespaces of every node after the first, made inside the first's (so they inherit its mounts,
   * then cover /run, /var/lib and /var/log with their own), and the link between them: the first node's
   * veth peer moved into each (one other node only: a veth pair has two ends), its pods' subnet routed there.
   */
  private async linkNodes(): Promise<void> {
    for (const node of this.nodes.slice(1)) {
      mkdirSync(join(this.nodeDir(node), 'cni'), { recursive: true });
      const [cmd, args] = this.enter(
        ['unshare', '-n', '-m', '--propagation', 'private', 'sh', '-c', nodeHolderScript, this.dir],
        true,
      );
      const quoted = [cmd, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
      const holder = run('sh', ['-c', `${joinCgroup(this.cgroup)} exec ${quoted}`], { env: withoutProxy() });
      this.holders.push(holder);
      this.children.push(holder);
      await holder.waitFor(/^holder ready$/m, 30_000);
      const sh = async (script: string, on: ClusterNode) => {
        const r = await this.exec(['sh', '-ec', script], { node: on });
        if (r.code !== 0) throw new Error(`linking ${node.name}: ${script}: ${r.stderr}`);
      };
      await sh(
        `ip link set node0-peer netns ${holder.pid}\nip route add ${node.podCidr} via ${node.ip}`,
        this.nodes[0]!,
      );
      await sh(
        [
          'ip link set node0-peer name node0',
          `ip addr add ${node.ip}/24 dev node0`,
          'ip link set node0 up',
          `ip route add default via ${this.nodes[0]!.ip} dev node0`,
        ].join('\n'),
        node,
      );
    }
    // A kubelet answers its own node only (the pods there, and itself): what reaches it over the link is another node's.
    if (this.egress)
      for (const node of this.nodes)
        await this.exec(
          [
            'iptables',
            '-I',
            'INPUT',
            '-i',
            'node0',
            '-p',
            'tcp',
            '--dport',
            '10250',
            '-j',
            'REJECT',
            '--reject-with',
            'tcp-reset',
          ],
          {
            node,
          },
        ).then((r) => {
          if (r.code !== 0) throw new Error(`iptables on ${node.name}: ${r.stderr}`);
        });
  }

  /** A long-running component in a node's namespaces (the first node's by default) and the cgroup tree; its output is kept. */
  private component(name: string, argv: string[], node: ClusterNode = this.nodes[0]!): Child {
    const [cmd, args] = this.enter(argv, true, node);
    const quoted = [cmd, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const child = run('sh', ['-c', `${joinCgroup(this.cgroup)} exec ${quoted}`], {
      env: { ...withoutProxy(), PATH: `${process.env.PATH}:/usr/sbin:/sbin` },
    });
    void child.exited.then((exit) => {
      if (!this.stopped && name !== 'hub')
        this.log(`${name} exited (${exit.code ?? exit.signal}):\n${(child.stdout() + child.stderr()).slice(-3000)}`);
    });
    this.children.push(child);
    this.components.set(name, child);
    return child;
  }

  private problems: string[] = [];
  private log(text: string): void {
    this.problems.push(text);
  }

  /** What components that died said, for a failing test's message. */
  diagnostics(): string {
    return this.problems.join('\n');
  }

  /** Runs a command in a node's network namespace (the first node's by default); never rejects. */
  exec(argv: string[], opts: { input?: string; timeoutMs?: number; node?: ClusterNode } = {}): Promise<Result> {
    const [cmd, args] = this.enter(argv, false, opts.node);
    return runToEnd(cmd, args, { timeoutMs: opts.timeoutMs ?? 60_000, input: opts.input, env: withoutProxy() });
  }

  /** kubectl 1.28 from the reference binaries, as `as` (admin: system:masters). */
  kubectl(
    args: string[],
    opts: { as?: 'admin' | TokenUser; input?: string; timeoutMs?: number } = {},
  ): Promise<Result> {
    return this.exec(
      [join(this.binDir, 'kubectl'), `--kubeconfig=${this.kubeconfigs[opts.as ?? 'admin']}`, ...args],
      opts,
    );
  }

  /** The same, throwing with kubectl's stderr unless it exits 0; resolves with stdout. */
  async kubectlOk(args: string[], opts: Parameters<NodeCluster['kubectl']>[1] = {}): Promise<string> {
    const r = await this.kubectl(args, opts);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} (exit ${r.code}): ${r.stderr}${this.diagnostics()}`);
    return r.stdout;
  }

  /** A streaming kubectl (logs -f, get -w) in the namespace; the caller kills it. */
  kubectlStream(args: string[]): Child {
    const [cmd, argv] = this.enter([join(this.binDir, 'kubectl'), `--kubeconfig=${this.kubeconfigs.admin}`, ...args]);
    const child = run(cmd, argv, { env: withoutProxy() });
    this.children.push(child);
    return child;
  }

  /**
   * The harness's way into the first node's network namespace: netns-gateway.cjs there, listening on a
   * Unix socket in the cluster's folder (support/netns-client.ts speaks to it), so the test process
   * reaches Service and pod addresses of the cluster as a pod would, and nothing else.
   */
  async startGateway(): Promise<string> {
    const socket = join(this.dir, 'gateway.sock');
    const gateway = this.component('gateway', [process.execPath, gatewayScript, socket]);
    await gateway.waitFor(/gateway ready/, 30_000);
    return socket;
  }

  /** Writes `text` to `name` in the cluster's folder (or to `name` itself, a path inside it). */
  private file(name: string, text: string): string {
    const path = name.startsWith('/') ? name : join(this.dir, name);
    writeFileSync(path, text);
    return path;
  }

  private async boot(images: (dir: string) => Promise<string[]>): Promise<void> {
    const bin = (name: string) => join(this.binDir, name);
    const f = this.pki.files;
    const d = this.dir;
    for (const node of this.nodes) {
      const nd = this.nodeDir(node);
      mkdirSync(join(nd, 'cni'), { recursive: true });
      writeFileSync(join(nd, 'cni', '10-spoke-node.conflist'), JSON.stringify(cniConfig(node)));
      this.component(
        this.named('containerd', node),
        ['containerd', `--config=${this.file(join(nd, 'containerd.toml'), containerdConfig(nd))}`],
        node,
      );
    }
    const etcd = this.component('etcd', [
      bin('etcd'),
      '--name=node',
      `--data-dir=${join(d, 'etcd')}`,
      '--listen-client-urls=http://127.0.0.1:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=node=http://127.0.0.1:2380',
    ]);
    // Images go in while the control plane comes up: the pause image must be there before the first sandbox.
    const imported = (async () => {
      const archives = await images(d);
      for (const node of this.nodes) {
        await waitUntilAsync(
          async () => existsSync(this.containerdSocket(node)) && (await this.ctr(node, ['version'])).code === 0,
          60_000,
          `containerd on ${node.name}`,
          100,
        );
        for (const archive of archives) {
          const r = await this.ctr(node, ['-n', 'k8s.io', 'images', 'import', archive], 600_000);
          if (r.code !== 0) throw new Error(`ctr images import ${archive} on ${node.name}: ${r.stderr}`);
        }
      }
    })();
    // Long, not slow: etcd's first WAL fsync queues behind the image import's writes on a busy disk (a CI
    // run saw no line for 60 s); the wait ends on the line.
    await etcd.waitFor(/ready to serve client requests/, 300_000);
    // prettier-ignore
    this.component('kube-apiserver', [
      bin('kube-apiserver'),
      `--advertise-address=${nodeIp}`,
      '--bind-address=0.0.0.0',
      '--secure-port=6443',
      '--etcd-servers=http://127.0.0.1:2379',
      `--tls-cert-file=${f['apiserver.crt']}`,
      `--tls-private-key-file=${f['apiserver.key']}`,
      `--client-ca-file=${f['client-ca.crt']}`,
      `--token-auth-file=${f['tokens.csv']}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      `--service-cluster-ip-range=${serviceCidr}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${f['sa.key']}`,
      `--service-account-signing-key-file=${f['sa.key']}`,
      `--kubelet-client-certificate=${f['apiserver-kubelet-client.crt']}`,
      `--kubelet-client-key=${f['apiserver-kubelet-client.key']}`,
      '--kubelet-preferred-address-types=InternalIP',
      `--requestheader-client-ca-file=${f['front-proxy-ca.crt']}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${f['front-proxy-client.crt']}`,
      `--proxy-client-key-file=${f['front-proxy-client.key']}`,
      '--profiling=false',
      ...(this.egress
        ? [`--egress-selector-config-file=${this.file('egress.yaml', egressConfig(this.hubSocket))}`]
        : []),
    ]);
    await waitUntilAsync(
      async () => (await this.kubectl(['get', '--raw', '/readyz'], { timeoutMs: 10_000 })).stdout === 'ok',
      120_000,
      `kube-apiserver /readyz${this.diagnostics()}`,
      250,
    );
    const cm = kubeconfig(d, 'controller-manager', {
      cert: f['controller-manager.crt']!,
      key: f['controller-manager.key']!,
    });
    // prettier-ignore
    this.component('kube-controller-manager', [
      bin('kube-controller-manager'),
      `--kubeconfig=${cm}`,
      `--authentication-kubeconfig=${cm}`,
      `--authorization-kubeconfig=${cm}`,
      `--service-account-private-key-file=${f['sa.key']}`,
      `--root-ca-file=${f['serving-ca.crt']}`,
      `--cluster-signing-cert-file=${f['client-ca.crt']}`,
      `--cluster-signing-key-file=${f['client-ca.key']}`,
      '--use-service-account-credentials=true',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
    ]);
    const sched = kubeconfig(d, 'scheduler', { cert: f['scheduler.crt']!, key: f['scheduler.key']! });
    this.component('kube-scheduler', [
      bin('kube-scheduler'),
      `--kubeconfig=${sched}`,
      `--authentication-kubeconfig=${sched}`,
      `--authorization-kubeconfig=${sched}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
    ]);
    await this.startClusterDns();
    const proxy = kubeconfig(d, 'kube-proxy', { cert: f['kube-proxy.crt']!, key: f['kube-proxy.key']! });
    for (const node of this.nodes)
      this.component(
        this.named('kube-proxy', node),
        [
          bin('kube-proxy'),
          `--config=${this.file(join(this.nodeDir(node), 'kube-proxy.yaml'), kubeProxyConfig(proxy, node))}`,
        ],
        node,
      );
    await imported;
    for (const node of this.nodes) {
      const nd = this.nodeDir(node);
      const kubelet = kubeconfig(d, `kubelet-${node.name}`, {
        cert: f[`kubelet-${node.name}.crt`]!,
        key: f[`kubelet-${node.name}.key`]!,
      });
      // Each kubelet its own cgroup root: one removes the pod cgroups it does not know.
      const cgroupRoot = node === this.nodes[0] ? this.cgroup : join(this.cgroup, node.name);
      if (cgroupRoot !== this.cgroup) createCgroup(cgroupRoot);
      // prettier-ignore
      this.component(
        this.named('kubelet', node),
        [
          bin('kubelet'),
          `--config=${this.file(join(nd, 'kubelet.yaml'), kubeletConfig(nd, node, this.pki, cgroupRoot))}`,
          `--kubeconfig=${kubelet}`,
          '--root-dir=/var/lib/kubelet',
          `--node-ip=${node.ip}`,
          `--hostname-override=${node.name}`,
          '--v=1',
        ],
        node,
      );
    }
    for (const node of this.nodes) {
      await waitUntilAsync(
        async () => (await this.kubectl(['get', 'node', node.name])).code === 0,
        120_000,
        `${node.name} to register${this.diagnostics()}`,
        500,
      );
      await this.kubectlOk(['wait', '--for=condition=Ready', `node/${node.name}`, '--timeout=120s'], {
        timeoutMs: 130_000,
      });
    }
  }

  /** The first node's components keep their plain names; another node's carry its name. */
  private named(component: string, node: ClusterNode): string {
    return node === this.nodes[0] ? component : `${component}-${node.name}`;
  }

  private ctr(node: ClusterNode, args: string[], timeoutMs = 30_000): Promise<Result> {
    return runToEnd('ctr', ['--address', this.containerdSocket(node), ...args], { timeoutMs });
  }

  /**
   * dnsmasq on the node IP, authoritative for cluster.local, its records `<svc>.<ns>.svc.cluster.local`
   * from a watch of Services (A and PTR only: no SRV or pod records; an ExternalName Service whose target is
   * a Service of the cluster answers with that Service's address, an A record where CoreDNS gives a CNAME,
   * which is what a client's resolver ends with either way), plus the hub's name;
   * and kube-system/kube-dns at clusterDNS, a selectorless Service whose Endpoints point at it, so pods
   * reach it through kube-proxy as they would reach CoreDNS.
   */
  private async startClusterDns(): Promise<void> {
    const hosts = join(this.dir, 'cluster-hosts');
    const services = new Map<string, string>();
    /** ExternalName Services: their name -> their target, answered with the target's address while it is a Service here. */
    const aliases = new Map<string, string>();
    const write = () => {
      const lines = [
        `${nodeIp} ${hubHost}`,
        ...[...services].map(([name, ip]) => `${ip} ${name}`),
        ...[...aliases].flatMap(([name, target]) => {
          const ip = services.get(target.replace(/\.$/, ''));
          return ip ? [`${ip} ${name}`] : [];
        }),
      ];
      writeFileSync(`${hosts}.tmp`, `${lines.join('\n')}\n`);
      renameSync(`${hosts}.tmp`, hosts);
    };
    write();
    // prettier-ignore
    const dnsmasq = this.component('dnsmasq', [
      'dnsmasq',
      '--keep-in-foreground',
      '--conf-file=/dev/null',
      '--no-resolv',
      '--no-hosts',
      `--addn-hosts=${hosts}`,
      '--local=/cluster.local/',
      `--listen-address=${nodeIp}`,
      '--bind-interfaces',
      '--port=53',
      `--pid-file=${join(this.dir, 'dnsmasq.pid')}`,
      '--user=root',
      '--log-facility=-',
    ]);
    await dnsmasq.waitFor(/started, version/, 30_000);
    await this.kubectlOk(['apply', '-f', '-'], {
      input:
        `apiVersion: v1\nkind: Service\nmetadata: {name: kube-dns, namespace: kube-system}\nspec:\n  clusterIP: ${clusterDnsIp}\n  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]\n---\n` +
        `apiVersion: v1\nkind: Endpoints\nmetadata: {name: kube-dns, namespace: kube-system}\nsubsets:\n- addresses: [{ip: ${nodeIp}}]\n  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]\n`,
    });
    // One line per watch event; every change rewrites the hosts file and tells dnsmasq (SIGHUP).
    const watch = () => {
      const [cmd, args] = this.enter([
        join(this.binDir, 'kubectl'),
        `--kubeconfig=${this.kubeconfigs.admin}`,
        'get',
        'services',
        '--all-namespaces',
        '--watch',
        '--output-watch-events',
        '-o',
        'jsonpath={.type} {.object.metadata.namespace} {.object.metadata.name} {.object.spec.clusterIP} {.object.spec.externalName}{"\\n"}',
      ]);
      const w = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'], env: withoutProxy() });
      this.servicesWatch = w;
      let partial = '';
      w.stdout.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString()).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          const [type, ns, name, ip, externalName] = line.split(' ');
          const key = `${name}.${ns}.svc.cluster.local`;
          if (type === 'DELETED' || !ip || ip === 'None') services.delete(key);
          else services.set(key, ip);
          if (type === 'DELETED' || !externalName) aliases.delete(key);
          else aliases.set(key, externalName);
        }
        write();
        if (dnsmasq.pid) process.kill(dnsmasq.pid, 'SIGHUP');
      });
      // A watch ends now and then (the API server's timeout): start another, which lists again.
      w.on('exit', () => {
        if (!this.stopped) watch();
      });
    };
    watch();
    await waitUntilAsync(
      async () => (await this.dig(nodeIp, 'kubernetes.default.svc.cluster.local')).trim() === '10.96.0.1',
      60_000,
      'dnsmasq to answer kubernetes.default.svc.cluster.local',
      250,
    );
  }

  /** dig's short answer for `name` at `server`:53, from the node. */
  async dig(server: string, name: string, extra: string[] = []): Promise<string> {
    return (await this.exec(['dig', `@${server}`, '+short', '+time=2', '+tries=1', name, ...extra])).stdout;
  }

  /** The Go proxy-server (v0.36, the version cluster-proxy pins) as the hub: agents on hubHost:8091 with mTLS, hub clients on a Unix socket here. */
  async startHub(agentTls: { ca: string; cert: string; key: string }, strategies = 'destHost'): Promise<string> {
    const socket = this.hubSocket;
    // prettier-ignore
    const hub = this.component('hub', [
      join(anpV036BinDir()!, 'proxy-server'),
      '--mode=grpc',
      `--uds-name=${socket}`,
      '--server-port=0',
      `--proxy-strategies=${strategies}`,
      '--server-count=1',
      '--server-id=hub-0',
      `--agent-bind-address=${nodeIp}`,
      `--agent-port=${hubAgentPort}`,
      `--cluster-ca-cert=${agentTls.ca}`,
      `--cluster-cert=${agentTls.cert}`,
      `--cluster-key=${agentTls.key}`,
      '--health-bind-address=127.0.0.1',
      '--health-port=8092',
      '--admin-bind-address=127.0.0.1',
      '--admin-port=8095',
      '-v=2',
    ]);
    this.hubChild = hub;
    await hub.waitFor(/Starting health server for healthchecks/, 30_000);
    await waitUntilAsync(
      async () => existsSync(socket) && statSync(socket).isSocket(),
      10_000,
      "the hub's Unix socket",
    );
    return socket;
  }

  /** Stops the hub (agents lose their streams); startHub brings it back. */
  async stopHub(): Promise<void> {
    const hub = this.hubChild;
    if (!hub) return;
    this.hubChild = undefined;
    hub.kill('SIGTERM');
    const timer = setTimeout(() => hub.kill('SIGKILL'), 5000);
    await hub.exited;
    clearTimeout(timer);
  }

  get hubLog(): string {
    return this.hubChild ? this.hubChild.stdout() + this.hubChild.stderr() : '';
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.servicesWatch?.kill('SIGKILL');
    await destroyCgroup(this.cgroup);
    for (const c of this.children) c.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
    rmSync(stateFile, { force: true });
  }
}

const gatewayScript = fileURLToPath(new URL('./netns-gateway.cjs', import.meta.url));

/** This process's environment without proxy variables: nothing started in the cluster may be pointed outside. */
function withoutProxy(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (/^(https?|no|all)_proxy$/i.test(name)) delete env[name];
  return env;
}

/** Shell text that moves the shell itself into every hierarchy's cgroup at `path` (its children follow). */
const joinCgroup = (path: string) =>
  hierarchies()
    .map((h) => `echo $$ > ${join(cgroupRoot, h, path, 'cgroup.procs')};`)
    .join(' ');

/** Every node's own mounts of the paths its components hard-code (see the top of this file). */
const nodeMounts = [
  'mount -t tmpfs -o mode=755 tmpfs /run',
  'mkdir -p /run/netns /run/containerd',
  'mount -t tmpfs -o mode=755 tmpfs /var/lib',
  'mkdir -p /var/lib/kubelet /var/lib/cni',
  'mount -t tmpfs -o mode=755 tmpfs /var/log',
];
/** Every node routes its pods' traffic, through iptables (kube-proxy, the CNI bridge). */
const nodeRouting = [
  'echo 1 > /proc/sys/net/ipv4/ip_forward',
  'echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables',
  'echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet',
];

/** Run by the holder inside its new namespaces; no single quotes (it is quoted once). */
const holderScript = [
  'set -e',
  ...nodeMounts,
  // No component asks this machine's resolver (whose address is outside), and containerd, which copies
  // it into a pod whose kubelet DNS settings are empty (dnsPolicy Default here), copies no nameserver.
  'mount --bind "$0/resolv.conf" /etc/resolv.conf',
  'ip link set lo up',
  'ip link add node0 type veth peer name node0-peer',
  `ip addr add ${nodeIp}/24 dev node0`,
  'ip link set node0 up',
  'ip link set node0-peer up',
  `ip route add default via ${nodeIp.replace(/\d+$/, '1')} dev node0`,
  ...nodeRouting,
  'echo holder ready',
  'exec sleep infinity',
].join('\n');

/** Run by the holder of every node after the first, inside its new namespaces (the first's mounts inherited); no single quotes. */
const nodeHolderScript = [
  'set -e',
  ...nodeMounts,
  'ip link set lo up',
  ...nodeRouting,
  'echo holder ready',
  'exec sleep infinity',
].join('\n');

const cniConfig = (node: ClusterNode) => ({
  cniVersion: '1.0.0',
  name: 'spoke-node',
  plugins: [
    {
      type: 'bridge',
      bridge: 'cni0',
      isGateway: true,
      ipMasq: true,
      hairpinMode: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: node.podCidr }]], routes: [{ dst: '0.0.0.0/0' }] },
    },
    { type: 'portmap', capabilities: { portMappings: true } },
  ],
});

/** kube-apiserver's egress to the cluster (kubelets, pods, Services) through the hub's gRPC frontend, as konnectivity configures it. */
const egressConfig = (socket: string) => `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: GRPC
      transport:
        uds:
          udsName: ${socket}
`;

const containerdConfig = (dir: string) => `version = 2
root = "${join(dir, 'containerd')}"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "${join(dir, 'containerd.sock')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${join(dir, 'cni')}"
`;

const kubeProxyConfig = (kubeconfigPath: string, node: ClusterNode) => `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: ${kubeconfigPath}
hostnameOverride: ${node.name}
clusterCIDR: ${clusterCidr}
# nf_conntrack_max and the TCP timeouts are not writable from a network namespace other than the first.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`;

function kubeletConfig(dir: string, node: ClusterNode, pki: Pki, cgroup: string): string {
  const resolv = join(dir, 'kubelet-resolv.conf');
  // No host nameserver leaks into pods: dnsPolicy Default gets this empty file.
  writeFileSync(resolv, '');
  mkdirSync(join(dir, 'volume-plugins'), { recursive: true });
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${node.ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${pki.files['client-ca.crt']}}
authorization: {mode: Webhook}
tlsCertFile: ${pki.files[`kubelet-serving-${node.name}.crt`]}
tlsPrivateKeyFile: ${pki.files[`kubelet-serving-${node.name}.key`]}
containerRuntimeEndpoint: unix://${join(dir, 'containerd.sock')}
cgroupDriver: cgroupfs
cgroupRoot: ${cgroup}
failSwapOn: false
clusterDNS: [${clusterDnsIp}]
clusterDomain: cluster.local
resolvConf: ${resolv}
volumePluginDir: ${join(dir, 'volume-plugins')}
# Nothing can be pulled here: never collect the imported images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
rotateCertificates: false
`;
}
