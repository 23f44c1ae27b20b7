// Paired rounds: a figure and its baseline measured in turn, several times, judged on the median
// round. One round moves by 10-30% on a shared machine; which of the two goes first alternates, so
// neither always runs on what the other left behind (warm caches, TIME_WAIT sockets, a busy core).

/**
 * `n` rounds of `ours` and `baseline`, [ours, baseline] each; the baseline goes first in the first
 * round when `baselineFirst`.
 */
export async function pairedRounds<S, F>(
  n: number,
  baseline: S,
  ours: S,
  measure: (x: S) => Promise<F>,
  baselineFirst = true,
): Promise<Array<[F, F]>> {
  const rounds: Array<[F, F]> = [];
  for (let r = 0; r < n; r++) {
    if ((r % 2 === 0) === baselineFirst) {
      const base = await measure(baseline);
      rounds.push([await measure(ours), base]);
    } else {
      const mine = await measure(ours);
      rounds.push([mine, await measure(baseline)]);
    }
  }
  return rounds;
}

/** The round whose ratio (ours / baseline) is the median of the rounds': [ours, baseline, every round's ratio]. */
export function medianRound<F>(
  rounds: Array<[F, F]>,
  value: (f: F) => number | undefined,
): [number, number, string] | undefined {
  const pairs = rounds
    .map(([o, g]) => [value(o), value(g)] as const)
    .filter((p): p is readonly [number, number] => p[0] !== undefined && p[1] !== undefined);
  if (pairs.length === 0) return undefined;
  const sorted = [...pairs].sort((a, b) => a[0] / a[1] - b[0] / b[1]);
  const [ours, base] = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return [ours, base, pairs.map(([o, g]) => `x${(o / g).toFixed(2)}`).join(', ')];
}
