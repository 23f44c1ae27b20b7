// Makes sure dig and kdig (Debian's dnsutils and knot-dnsutils) are there for the DNS tests, curl for
// the lines `npm start` prints, kubectl (Debian's kubernetes-client, for `kubectl kustomize`) for the
// manifests test, and promtool (Debian's prometheus; in a container without an init system its service
// does not start) for the monitoring test: CI runs as root on Debian with the Debian mirrors reachable,
// so install them when missing. The whole suite's only (vitest.config.ts): the unit lane needs none of them.
import { execFileSync } from 'node:child_process';
import { hasCommand as has } from './commands.js';

// Debian package for each tool.
const packages: Record<string, string> = {
  dig: 'dnsutils',
  kdig: 'knot-dnsutils',
  kubectl: 'kubernetes-client',
  promtool: 'prometheus',
  curl: 'curl',
};

export default function setup(): void {
  const missing = [
    ...new Set(
      Object.keys(packages)
        .filter((tool) => !has(tool))
        .map((tool) => packages[tool]!),
    ),
  ];
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    console.warn(
      `global-setup: not root, so not installing ${missing.join(' ')}; the tests that use them will fail (apt-get install ${missing.join(' ')})`,
    );
    return;
  }
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'inherit' });
    install();
  }
}
