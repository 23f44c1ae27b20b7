/**
 * What the balancer does with a connection meant for the proxy-server that is down (BENCH_FLEET_DOWN):
 * `held`, haproxy's default, retries it three times a second apart (it connects if the server is back
 * by then, else is closed); `refused` passes the refusal on at once (`retries 0`: a cloud load balancer,
 * kube-proxy to a pod whose port is closed); `removed` takes the server out of rotation by a health
 * check (a Service whose endpoint a readiness probe removed), so every attempt lands on a held server
 * until it is back. The fleet section measures one; lone-model.ts replays all three.
 */
export const downServers = ['held', 'refused', 'removed'] as const;
export type DownServer = (typeof downServers)[number];

/** BENCH_FLEET_DOWN's value, `held` when unset. */
export function downServerFromEnv(value = process.env.BENCH_FLEET_DOWN ?? 'held'): DownServer {
  const found = downServers.find((d) => d === value);
  if (!found) throw new Error(`BENCH_FLEET_DOWN=${value}: expected ${downServers.join(', ')}`);
  return found;
}
