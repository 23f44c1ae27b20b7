// The hub routes by the identifiers a stream was opened with, so when the served names change the agent
// re-registers (ClientSet.setIdentifiers: new streams first, then DRAIN and close the old ones when
// idle). A burst of changes (a relist, a namespace of Services created at once) costs one swap.
import { mergeIdentifiers } from '../agent/identifiers.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { ruleIdentifiers } from '../rules/identifiers.js';
import type { KubeMetrics } from './metrics.js';

/** grpc-go's coming default limit for the whole header list (GRPC_GO_EXPERIMENTAL_ENABLE_8KB_DEFAULT_HEADER_LIST_SIZE). */
export const identifiersWarnBytes = 8 << 10;

export interface ReregisterOptions {
  holder: RuleHolder;
  clients: { setIdentifiers(identifiers: string): void };
  /** --agent-identifiers, kept ahead of the rule names. */
  extra: string;
  debounceMs?: number;
  log: Logger;
  metrics?: KubeMetrics;
}

/** Starts following rule changes; returns the function that stops it. */
export function followRuleIdentifiers(opts: ReregisterOptions): () => void {
  const debounceMs = opts.debounceMs ?? 500;
  let timer: NodeJS.Timeout | undefined;
  let firstChangeAt = 0;
  let last = asSet(mergeIdentifiers(opts.extra, ruleIdentifiers(opts.holder.current)));
  const apply = () => {
    timer = undefined;
    const next = mergeIdentifiers(opts.extra, ruleIdentifiers(opts.holder.current));
    if (asSet(next) === last) return;
    last = asSet(next);
    if (next.length > identifiersWarnBytes) {
      opts.log.warn({ bytes: next.length, limit: identifiersWarnBytes }, 'agent identifiers exceed 8 KiB: a proxy-server built with grpc-go 8 KiB header list limits would refuse the stream');
    }
    opts.metrics?.reregistrations.inc();
    opts.clients.setIdentifiers(next);
  };
  // Trailing debounce, but a steady trickle of changes still applies every 4 debounce periods.
  const off = opts.holder.onChange(() => {
    const now = Date.now();
    if (timer === undefined) firstChangeAt = now;
    clearTimeout(timer);
    timer = setTimeout(apply, Math.max(0, Math.min(debounceMs, firstChangeAt + 4 * debounceMs - now)));
  });
  return () => {
    off();
    clearTimeout(timer);
  };
}

/** The hub sees a set of identifiers: reordering the same names is no reason to re-register. */
function asSet(identifiers: string): string {
  return identifiers.split('&').sort().join('&');
}
