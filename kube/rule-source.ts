// The latest of each Kubernetes source (ConfigMap rules, Services, selected namespaces) and the step
// that turns them into the rules in force: recompute on every change, apply when valid and different,
// otherwise log why and keep the last good rules.
import type { V1ConfigMap, V1Namespace, V1Service } from '@kubernetes/client-node';
import type { RuleHolder } from '../rules/holder.js';
import type { NamingContext } from '../rules/naming.js';
import type { Logger } from '../observability/log.js';
import { autoExposed, type ServiceInfo } from './auto-expose.js';
import { composeRules, configMapRules, sameRules, type RuleText } from './compose.js';
import type { KubeMetrics } from './metrics.js';

export interface KubeRuleSourceOptions {
  naming: NamingContext;
  expose: readonly string[];
  rulesFile?: RuleText;
  /** NAMESPACE/NAME of the rules ConfigMap, for messages. */
  configMapRef: string;
  annotation: string;
  holder: RuleHolder;
  log: Logger;
  metrics: KubeMetrics;
}

export class KubeRuleSource {
  private configMap?: RuleText;
  private services: ServiceInfo[] = [];
  private namespaces = new Set<string>();
  /** The last problem reported, so a relist of the same bad object is not logged again at warn. */
  private lastProblem = '';
  /** The ConfigMap as it is now was rejected: its previous text is still used until it is fixed. */
  private configMapRejected = false;
  /** The last recomputation failed: the sources as they are now are not in force. */
  private composeFailed = false;

  constructor(private readonly opts: KubeRuleSourceOptions) {}

  setConfigMap(items: readonly V1ConfigMap[]): void {
    const rules = configMapRules(this.opts.configMapRef, items[0]);
    if (typeof rules === 'string') {
      this.configMapRejected = true;
      this.reject([rules]);
    } else {
      if (rules === undefined && this.configMap !== undefined)
        this.opts.log.warn({ configmap: this.opts.configMapRef }, 'rules ConfigMap deleted: its rules are withdrawn');
      const previous = this.configMap;
      this.configMap = rules;
      // A bad edit is rejected whole: the last good text stays, so other sources keep applying.
      this.configMapRejected = !this.recompute();
      if (this.configMapRejected) this.configMap = previous;
    }
    this.showRejected();
  }

  setServices(items: readonly V1Service[]): void {
    this.services = items.map((s) => ({
      namespace: s.metadata?.namespace ?? '',
      name: s.metadata?.name ?? '',
      annotations: s.metadata?.annotations ?? {},
    }));
    this.recompute();
    this.showRejected();
  }

  setNamespaces(items: readonly V1Namespace[]): void {
    this.namespaces = new Set(items.map((n) => n.metadata?.name ?? ''));
    this.recompute();
    this.showRejected();
  }

  /** A bad ConfigMap stays rejected until it changes, even when later Service changes apply. */
  private showRejected(): void {
    this.opts.metrics.rulesRejected.set(this.configMapRejected || this.composeFailed ? 1 : 0);
  }

  /** False when the sources do not make valid rules (then nothing changed). */
  private recompute(): boolean {
    const { opts } = this;
    const exposed = autoExposed(this.services, { annotation: opts.annotation, namespaces: this.namespaces });
    const result = composeRules({
      naming: opts.naming,
      expose: opts.expose,
      files: [opts.rulesFile, this.configMap].filter((f): f is RuleText => f !== undefined),
      autoExposed: exposed,
      services: this.services,
    });
    this.composeFailed = !result.ok;
    if (!result.ok) {
      this.reject(result.errors);
      return false;
    }
    if (result.skipped)
      this.report('warn', result.skipped, 'auto-exposed Services left out: they collide with explicit rules');
    else this.lastProblem = '';
    opts.metrics.autoExposed.set(exposed.length);
    if (sameRules(result.value, opts.holder.current)) {
      opts.metrics.ruleUpdates.inc({ result: 'unchanged' });
      return true;
    }
    const before = new Set(opts.holder.current.hosts());
    const after = new Set(result.value.hosts());
    opts.holder.replace(result.value);
    opts.metrics.ruleUpdates.inc({ result: 'applied' });
    const added = [...after].filter((h) => !before.has(h));
    const removed = [...before].filter((h) => !after.has(h));
    opts.log.info(
      { names: after.size, added: added.slice(0, 20), removed: removed.slice(0, 20) },
      'rules updated from the Kubernetes API',
    );
    return true;
  }

  private reject(errors: string[]): void {
    this.opts.metrics.ruleUpdates.inc({ result: 'rejected' });
    this.report('error', errors, 'rules rejected: the last good rules stay in force');
  }

  /** Logs a problem; the same problem again (a relist) only at debug. */
  private report(level: 'warn' | 'error', errors: string[], msg: string): void {
    const problem = errors.join('; ');
    this.opts.log[problem === this.lastProblem ? 'debug' : level]({ errors }, msg);
    this.lastProblem = problem;
  }
}
