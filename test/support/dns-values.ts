// The DNS server's flags as tests set them: one place, so a new flag is added once.
import type { DnsFlagValues } from '../../dns/options.js';

/** Loopback, any port, `upstream` for the names no rule serves (port 9, discard, where none is asked). */
export function testDnsValues(upstream: string, extra: Partial<DnsFlagValues> = {}): DnsFlagValues {
  return {
    dnsBindAddress: '127.0.0.1',
    dnsPort: 0,
    dnsUpstream: upstream,
    dnsBatchedUdp: true,
    dnsForward: false,
    dnsTtl: 1000,
    dnsCacheSize: 100,
    dnsUpstreamTimeout: 500,
    dnsQueryLogSize: 0,
    ...extra,
  };
}
