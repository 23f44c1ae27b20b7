// The dial ID ("random") a dialer picks for DIAL_REQ: a non-negative int63, like Go's rand.Int63(),
// carried as a decimal string because it does not fit in a JS number.
import { randomBytes } from 'node:crypto';

export function newRandom(): string {
  return (randomBytes(8).readBigUInt64BE() >> 1n).toString();
}
