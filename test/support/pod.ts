// A pod's view of the file system for an agent process, without a container runtime: a private mount
// namespace (unshare, as root) where /etc is the pod's own (hosts with the pod's hostAliases, resolv.conf
// naming the cluster DNS, and the Secret volumes) and /var/run holds the service account, as the
// kubelet mounts them. The network is the host's, so everything stays on loopback.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const serviceAccountPath = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface PodSpec {
  /** hostAliases: name -> IP, added to the pod's /etc/hosts after localhost. */
  hostAliases: Record<string, string>;
  /** The cluster DNS, on port 53 (resolv.conf has no port). */
  nameserver: string;
  namespace: string;
  serviceAccount: { token: string; caCert: string | Buffer };
  /** More files by absolute path under /etc, e.g. the Secret volumes /etc/ca/ca.crt. */
  etcFiles: Record<string, string | Buffer>;
}

export interface Pod {
  /** [command, args] that run `argv` inside the pod's mounts. */
  command(argv: string[]): [string, string[]];
  remove(): void;
}

/** Why a pod cannot be emulated here (not root, no mount namespaces), or undefined when it can. */
export function podProblem(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root: a mount namespace and ports 53 and 443 need root';
  try {
    execFileSync('unshare', ['--mount', '--propagation', 'private', 'true'], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return `unshare --mount fails here: ${(err as Error).message.split('\n')[0]}`;
  }
}

export function emulatedPod(spec: PodSpec): Pod {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-pod-'));
  const put = (path: string, content: string | Buffer) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  };
  const aliases = Object.entries(spec.hostAliases).map(([name, ip]) => `${ip}\t${name}`);
  put(
    '/etc/hosts',
    [
      '# Kubernetes-managed hosts file.',
      '127.0.0.1\tlocalhost',
      '::1\tlocalhost ip6-localhost ip6-loopback',
      '',
      '# Entries added by HostAliases.',
      ...aliases,
      '',
    ].join('\n'),
  );
  put(
    '/etc/resolv.conf',
    `search ${spec.namespace}.svc.cluster.local svc.cluster.local cluster.local\nnameserver ${spec.nameserver}\noptions ndots:5\n`,
  );
  for (const [path, content] of Object.entries(spec.etcFiles)) put(path, content);
  put(`${serviceAccountPath}/token`, spec.serviceAccount.token);
  put(`${serviceAccountPath}/ca.crt`, spec.serviceAccount.caCert);
  put(`${serviceAccountPath}/namespace`, spec.namespace);
  // Seen by the child only. (On Debian /var/run is a symlink to /run: the mount lands there.)
  const script = 'mount --bind "$0/etc" /etc && mount --bind "$0/var/run" /var/run && exec "$@"';
  return {
    command: (argv) => ['unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', script, dir, ...argv]],
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
