// vitest's global setup for every lane: names the run (SPOKE_TEST_RUN), for what is done once per run
// (buildDist in processes.ts) and for the skip notes (skips.ts), and ends the run with one line saying
// which suites skipped for want of a real peer, and why.
import { randomUUID } from 'node:crypto';
import { takeSkipSummary } from './skips.js';

export default function setup(): () => void {
  process.env.SPOKE_TEST_RUN ??= randomUUID(); // the workers, started after this, inherit it
  return () => console.log(takeSkipSummary());
}
