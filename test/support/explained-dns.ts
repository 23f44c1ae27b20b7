// The DNS side of the API tests: rules for cluster1 (cluster domain cluster.test) exposing
// default/kubernetes, a resolver in front of a loopback upstream that knows the Service's address.
import { Registry } from 'prom-client';
import { startDns, type DnsStack } from '../../dns/setup.js';
import type { Logger } from '../../observability/log.js';
import { RuleHolder } from '../../rules/holder.js';
import { rulesFromFlags } from '../../rules/from-flags.js';
import { startTestUpstream, type TestUpstream } from './dns-upstream.js';

export interface ExplainedDns {
  dns: DnsStack;
  holder: RuleHolder;
  upstream: TestUpstream;
  close(): Promise<void>;
}

export async function startExplainedDns(log: Logger): Promise<ExplainedDns> {
  const upstream = await startTestUpstream({
    'kubernetes.default.svc.cluster.test': [{ type: 1, address: '127.0.0.1' }],
  });
  const rules = rulesFromFlags({
    clusterName: 'cluster1',
    agentNamespace: 'spoke-agent',
    clusterDomain: 'cluster.test',
    expose: ['default/kubernetes'],
    rulesFile: '',
    nodeName: '',
    nodeIps: [],
  });
  if (!rules.ok) throw new Error(rules.errors.join('; '));
  const holder = new RuleHolder(rules.value);
  const dns = await startDns(
    {
      dnsBindAddress: '127.0.0.1',
      dnsPort: 0,
      dnsUpstream: `127.0.0.1:${upstream.port}`,
      dnsBatchedUdp: false,
      dnsForward: false,
      dnsTtl: 1000,
      dnsCacheSize: 100,
      dnsUpstreamTimeout: 1000,
      dnsQueryLogSize: 100,
    },
    holder,
    new Registry(),
    log,
  );
  return {
    dns,
    holder,
    upstream,
    close: async () => {
      await dns.close();
      await upstream.close();
    },
  };
}
