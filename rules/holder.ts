// The rule set in force. Rules are replaced whole (a bad edit never reaches here: parseRules rejects it
// first), and readers either read `current` on each use or listen for changes to rebuild their state.
import type { RuleSet } from './rule-set.js';

export type RulesListener = (next: RuleSet, previous: RuleSet) => void;

export class RuleHolder {
  private rules: RuleSet;
  private readonly listeners = new Set<RulesListener>();
  /** Counts replacements; the DNS server uses it as the SOA serial. */
  generation = 1;

  constructor(initial: RuleSet) {
    this.rules = initial;
  }

  get current(): RuleSet {
    return this.rules;
  }

  replace(next: RuleSet): void {
    const previous = this.rules;
    this.rules = next;
    this.generation++;
    for (const listener of this.listeners) listener(next, previous);
  }

  /** Returns the function that removes the listener. */
  onChange(listener: RulesListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
