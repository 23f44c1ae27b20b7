// The rule set in force. Rules are replaced whole (a bad edit never reaches here: parseRules rejects it
// first), and readers either read `current` on each use or listen for changes to rebuild their state.
// Each rule remembers when it came into force: a rule that a replacement keeps unchanged keeps its
// time, so the API can say how old each rule is (metadata.creationTimestamp, kubectl's AGE).
import type { Rule, RuleSet } from './rule-set.js';

export type RulesListener = (next: RuleSet, previous: RuleSet) => void;

/** Equal for rules that answer the same names the same way, from the same source. */
const identity = (rule: Rule) => JSON.stringify(rule);

export class RuleHolder {
  private ruleSet: RuleSet;
  private readonly listeners = new Set<RulesListener>();
  private readonly inForceSince = new WeakMap<Rule, number>();
  /** Counts replacements; the DNS server uses it as the SOA serial. */
  generation = 1;

  constructor(
    initial: RuleSet,
    private readonly now: () => number = Date.now,
  ) {
    this.ruleSet = initial;
    const at = now();
    for (const rule of initial.rules) this.inForceSince.set(rule, at);
  }

  get current(): RuleSet {
    return this.ruleSet;
  }

  /** When `rule` (of the current set) came into force, in ms since the epoch. */
  since(rule: Rule): number {
    return this.inForceSince.get(rule) ?? this.now();
  }

  replace(next: RuleSet): void {
    const previous = this.ruleSet;
    const kept = new Map(previous.rules.map((r) => [identity(r), this.since(r)]));
    const at = this.now();
    for (const rule of next.rules) this.inForceSince.set(rule, kept.get(identity(rule)) ?? at);
    this.ruleSet = next;
    this.generation++;
    for (const listener of this.listeners) listener(next, previous);
  }

  /** Returns the function that removes the listener. */
  onChange(listener: RulesListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
