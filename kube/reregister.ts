// The hub routes by the identifiers a stream was opened with, so when the served names change the agent
// registers them (ClientSet.setIdentifierGroups: a stream for each new group of rule names on every
// server connection; the streams of groups gone DRAIN and close once the server stops routing to
// them). A burst of changes (a relist, a namespace of Services created at once) is applied once.
import { type Clock, systemClock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import type { KubeMetrics } from './metrics.js';

export interface ReregisterOptions {
  holder: RuleHolder;
  clients: { setIdentifierGroups(groups: readonly string[]): void };
  /** --agent-identifiers: names there are the agent's own, not a rule's. */
  extra: string;
  debounceMs?: number;
  /** What the debounce waits on (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
  log: Logger;
  metrics?: KubeMetrics;
}

/** Starts following rule changes; returns the function that stops it. */
export function followRuleIdentifiers(opts: ReregisterOptions): () => void {
  const debounceMs = opts.debounceMs ?? 50;
  const clock = opts.clock ?? systemClock;
  /** Cancels the pending apply; set while one is due. */
  let timer: (() => void) | undefined;
  let firstChangeAt = 0;
  const groupsNow = () => agentIdentifiers(opts.extra, opts.holder.current).groups;
  let last = groupsNow().join('\n');
  const apply = () => {
    timer = undefined;
    const next = groupsNow();
    if (next.join('\n') === last) return;
    last = next.join('\n');
    opts.metrics?.reregistrations.inc();
    opts.clients.setIdentifierGroups(next);
  };
  // Trailing debounce, but a steady trickle of changes still applies every 4 debounce periods.
  const off = opts.holder.onChange(() => {
    const now = clock.now();
    if (timer === undefined) firstChangeAt = now;
    timer?.();
    timer = clock.after(Math.max(0, Math.min(debounceMs, firstChangeAt + 4 * debounceMs - now)), apply);
  });
  return () => {
    off();
    timer?.();
  };
}
