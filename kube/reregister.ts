// The hub routes by the identifiers a stream was opened with, so when the served names change the agent
// re-registers (ClientSet.setIdentifiers: new streams first, then DRAIN and close the old ones when
// idle). A burst of changes (a relist, a namespace of Services created at once) costs one swap.
import { mergeIdentifiers } from '../proto/agent-identifiers.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { ruleIdentifiers } from '../rules/identifiers.js';
import type { KubeMetrics } from './metrics.js';

/**
 * Why a proxy-server may refuse `identifiers`, or undefined. Measured on loopback (kube/README.md):
 * the Go proxy-server parses them with url.ParseQuery, which stops at 10,000 parameters ("Invalid
 * backend"); a grpc-js server (the local hub) resets streams whose HPACK-compressed headers pass 64 KiB,
 * about 800 exposed Services. A refused stream is retried while the old streams keep serving the old names.
 */
export function identifierLimitProblem(identifiers: string): string | undefined {
  const params = identifiers === '' ? 0 : identifiers.split('&').length;
  if (params > 10_000) return `${params} identifiers: the Go proxy-server accepts at most 10000`;
  if (identifiers.length > 90_000) return `identifiers are ${identifiers.length} bytes: a grpc-js proxy-server refuses headers over 64 KiB compressed (about 92 KB of identifiers)`;
  return undefined;
}

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
    const problem = identifierLimitProblem(next);
    if (problem) opts.log.warn({ bytes: next.length, problem }, 'agent identifiers may be refused by the proxy-server');
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
