// Our agent when the path to the hub fails (issue 36), in a network namespace of the test's own with
// the Go v0.36 proxy-server (http-connect) and iptables making the faults (support/net-faults-lab.ts).
// Events only: each wait below is a give-up limit, never the thing asserted; how fast is the bench's
// (`npm run bench -- netfaults`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostsFile } from './support/hosts-file.js';
import { hubName, Lab, labUnavailable, type LabAgent } from './support/net-faults-lab.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import { waitUntilAsync } from './support/wait.js';

const skipped = labUnavailable();
if (skipped) skipNote('net-faults', skipped);

/** Give-up limit: a PING's 60 s + 20 s (should the kernel's detector not act) plus the server's 20 s on a dead connection. */
const giveUp = 150_000;

/** Fetches the page through the hub until one succeeds; a fetch that lands on a dead connection fails, the next may not. */
async function hubReachesCluster(lab: Lab): Promise<void> {
  await waitUntilAsync(
    async () => (await lab.fetchPage(30_000)).ok,
    giveUp,
    'a fetch through the hub to succeed',
    1000,
  );
}

const notReady = async (agent: LabAgent) => (await agent.readyz()) !== 200;

describe.skipIf(skipped !== undefined)('our agent when the path to the hub fails', () => {
  let lab: Lab;
  beforeAll(async () => {
    lab = await Lab.start();
  }, 60_000);
  afterAll(async () => {
    await lab?.close();
  });

  it(
    'after a silent loss of its connection it notices, opens a new one by itself (same process), is not ready meanwhile, and the hub reaches the cluster again',
    async () => {
      const agent = await lab.startAgent('ours');
      try {
        const [old] = agent.flows();
        expect((await lab.fetchPage()).ok).toBe(true);
        lab.faults.silentLoss(agent.flows());
        // New connections are held back until a probe has seen it not ready: the agent may reconnect
        // within a poll's interval, and it is the not-ready state this case wants to see.
        const release = lab.faults.holdNewConnections();
        await waitUntilAsync(async () => agent.flows().length === 0, giveUp, 'the agent to drop the dead connection');
        await waitUntilAsync(() => notReady(agent), giveUp, '/readyz to say not ready');
        release();
        await waitUntilAsync(
          async () => agent.flows().some((f) => f.local !== old!.local) && (await agent.readyz()) === 200,
          giveUp,
          'a new connection and /readyz 200',
        );
        expect(agent.flows().every((f) => f.local !== old!.local)).toBe(true);
        expect(agent.child.pid).toBe(agent.pid);
        // Found by the kernel's detector (keepalive, TCP_USER_TIMEOUT), not the minute-long HTTP/2 PING.
        expect(sampleValue(await agent.metrics(), 'spoke_agent_server_connections_lost_total{cause="timeout"}')).toBe(
          1,
        );
        await hubReachesCluster(lab);
        expect(await Promise.race([agent.child.exited.then(() => 'exited'), Promise.resolve('running')])).toBe(
          'running',
        );
      } finally {
        lab.faults.heal();
        await lab.stopAgent(agent);
      }
    },
    4 * giveUp,
  );

  it(
    'after a blackhole of the agent port, healed, it is connected again and the hub reaches the cluster',
    async () => {
      const agent = await lab.startAgent('ours');
      try {
        const [old] = agent.flows();
        lab.faults.blackhole();
        await waitUntilAsync(async () => agent.flows().length === 0, giveUp, 'the agent to drop the dead connection');
        await waitUntilAsync(() => notReady(agent), giveUp, '/readyz to say not ready');
        lab.faults.heal();
        await waitUntilAsync(
          async () => agent.flows().some((f) => f.local !== old!.local) && (await agent.readyz()) === 200,
          giveUp,
          'a new connection and /readyz 200 after the heal',
        );
        await hubReachesCluster(lab);
      } finally {
        lab.faults.heal();
        await lab.stopAgent(agent);
      }
    },
    4 * giveUp,
  );

  it(
    'when the hub moves (its name re-pointed, the old address blackholed) it holds the hub at the new address',
    async () => {
      const hosts = new HostsFile({ [hubName]: '127.0.0.2' });
      const agent = await lab.startAgent('ours', { host: hubName, hosts });
      try {
        expect(agent.flows('127.0.0.2').length).toBe(1);
        lab.faults.blackhole('127.0.0.2');
        hosts.point(hubName, '127.0.0.3');
        await waitUntilAsync(
          async () => agent.flows('127.0.0.3').length > 0 && (await agent.readyz()) === 200,
          giveUp,
          'a connection to the new address',
        );
        await hubReachesCluster(lab);
        expect(agent.flows('127.0.0.3').length).toBeGreaterThan(0);
      } finally {
        lab.faults.heal();
        await lab.stopAgent(agent);
        hosts.remove();
      }
    },
    4 * giveUp,
  );
});
