/**
 * mulberry32: a small, well-mixed 32-bit generator with numbers in [0, 1), so a failure (or a figure)
 * can be replayed from its seed. (An LCG's low bits repeat with a short period.)
 */
export function seededRandom(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
