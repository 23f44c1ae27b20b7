import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PacketType } from '../proto/packet-types.js';
import { AgentMetrics } from './metrics.js';

describe('AgentMetrics packet counts', () => {
  it('counts packets by segment and type, every type client.proto does not define under one UNKNOWN', async () => {
    const registry = new Registry();
    const metrics = new AgentMetrics(registry);
    metrics.observePacket('to_agent', PacketType.DIAL_REQ);
    metrics.observePacket('to_agent', PacketType.DIAL_REQ);
    metrics.observePacket('from_agent', PacketType.DIAL_RSP);
    for (const madeUp of [7, 99, 123456, -1, 2 ** 31 - 1]) metrics.observePacket('to_agent', madeUp);
    const text = await registry.getSingleMetricAsString('konnectivity_network_proxy_agent_stream_packets_total');
    const series = text.split('\n').filter((l) => !l.startsWith('#'));
    expect(series.sort()).toEqual(
      [
        'konnectivity_network_proxy_agent_stream_packets_total{segment="from_agent",packet_type="DIAL_RSP"} 1',
        'konnectivity_network_proxy_agent_stream_packets_total{segment="to_agent",packet_type="DIAL_REQ"} 2',
        'konnectivity_network_proxy_agent_stream_packets_total{segment="to_agent",packet_type="UNKNOWN"} 5',
      ].sort(),
    );
  });
});
