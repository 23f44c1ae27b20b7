// Makes sure dig and kdig (Debian's dnsutils and knot-dnsutils) are there for the DNS tests: CI runs
// as root on Debian with the Debian mirrors reachable, so install them when missing.
import { execFileSync } from 'node:child_process';

const has = (tool: string) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

export default function setup(): void {
  if (has('dig') && has('kdig')) return;
  if (process.getuid?.() !== 0) {
    console.warn('global-setup: dig/kdig missing and not root; the tests that use them will fail (apt-get install dnsutils knot-dnsutils)');
    return;
  }
  const install = () => execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'dnsutils', 'knot-dnsutils'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update'], { stdio: 'inherit' });
    install();
  }
}
