// A list+watch that assumes the API server will misbehave. client-node's ListWatch handles a normal
// watch end and 410 Gone, but stops for good on any other error (a 500, connection refused): here any
// error starts it over with backoff. A periodic relist on a fresh ListWatch is the watchdog against
// watches that go quiet. Consumers get the whole current list, never deltas, so nothing is lost
// across a restart; while failing, nothing is emitted and the last list stays in force.
import { ListWatch, Watch, type CoreV1Api, type KubeConfig, type KubernetesListObject, type KubernetesObject, type V1ConfigMap } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff } from '../agent/backoff.js';
import type { Logger } from '../observability/log.js';
import type { KubeMetrics, Resource } from './metrics.js';

export interface WatchSpec<T extends KubernetesObject> {
  resource: Resource;
  /** The collection's API path, e.g. /api/v1/namespaces/ns/configmaps. */
  path: string;
  /** Lists with the same selectors as the watch. */
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
}

/**
 * One ConfigMap by name. The field selector on the name lets a namespaced Role with resourceNames
 * grant list and watch.
 */
export function configMapSpec(core: CoreV1Api, resource: Resource, ref: { namespace: string; name: string }): WatchSpec<V1ConfigMap> {
  const { namespace } = ref;
  const fieldSelector = `metadata.name=${ref.name}`;
  return { resource, path: `/api/v1/namespaces/${namespace}/configmaps`, fieldSelector, list: () => core.listNamespacedConfigMap({ namespace, fieldSelector }) };
}

export interface ResilientWatchOptions<T extends KubernetesObject> {
  kubeConfig: KubeConfig;
  spec: WatchSpec<T>;
  /** The full current list after the first sync and after every change. */
  onList: (objects: readonly T[]) => void;
  log: Logger;
  metrics: KubeMetrics;
  resyncMs: number;
  backoff?: { initialMs: number; capMs: number };
  /** Longest pause before re-opening a watch that ended normally (client-node grows it to 30 s on a quiet watch). */
  rewatchCapMs?: number;
}

export class ResilientWatch<T extends KubernetesObject> {
  private readonly backoff: Backoff;
  private informer?: ListWatch<T>;
  /** Bumped on every (re)start: callbacks of an older informer are ignored. */
  private generation = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** A 403 is said once at warn: RBAC does not change by itself, the retries go on at debug. */
  private forbiddenSaid = false;

  constructor(private readonly opts: ResilientWatchOptions<T>) {
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 500, capMs: 30_000 });
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    clearTimeout(this.timer);
    this.retire();
  }

  private get resource(): Resource {
    return this.opts.spec.resource;
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    const generation = ++this.generation;
    const { spec, metrics } = this.opts;
    const current = () => generation === this.generation && !this.stopped;
    // client-node waits up to 30 s (doubling from 1 s on a quiet watch) before re-watching after a normal
    // end, and a change made meanwhile waits too: cap it. Its delay does not check for stop(), so a
    // retired informer parks here instead of opening one more watch.
    const cap = this.opts.rewatchCapMs ?? 1000;
    const delayFn = async (ms: number) => {
      await sleep(Math.min(ms, cap));
      if (!current()) await new Promise<never>(() => {});
    };
    const informer = new ListWatch<T>(spec.path, new Watch(this.opts.kubeConfig), spec.list, false, spec.labelSelector, spec.fieldSelector, { delayFn });
    this.informer = informer;
    let synced = false;
    const changed = () => {
      if (!current()) return;
      metrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
      if (synced) this.opts.onList(informer.list());
    };
    for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, changed);
    informer.on('error', (err: unknown) => current() && this.fail(err));
    // The watchdog also covers a list or watch request that hangs.
    this.timer = setTimeout(() => {
      if (!current()) return;
      metrics.watchRestarts.inc({ resource: this.resource, reason: 'resync' });
      this.opts.log.debug({ resource: this.resource }, 'periodic relist');
      this.retire();
      void this.run();
    }, this.opts.resyncMs);
    this.timer.unref();
    try {
      await informer.start(); // lists, then opens the watch; failures arrive as 'error'
    } catch (err) {
      if (current()) this.fail(err);
      return;
    }
    if (!current()) return;
    synced = true;
    this.backoff.reset();
    this.forbiddenSaid = false;
    metrics.watchSynced.set({ resource: this.resource }, 1);
    metrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
    this.opts.onList(informer.list());
  }

  private fail(err: unknown): void {
    const wait = this.backoff.next();
    this.opts.metrics.watchErrors.inc({ resource: this.resource });
    this.opts.metrics.watchSynced.set({ resource: this.resource }, 0);
    const fields = { resource: this.resource, error: describeApiError(err), retryInMs: Math.round(wait) };
    if (statusOf(err) !== 403) this.opts.log.warn(fields, 'watch failed; keeping the last known objects and retrying');
    else if (this.forbiddenSaid) this.opts.log.debug(fields, 'still forbidden');
    else {
      this.forbiddenSaid = true;
      const path = this.opts.spec.path;
      this.opts.log.warn({ ...fields, path }, `forbidden to list and watch ${path}: carrying on without it, retrying quietly; grant the agent's service account list and watch there (kube/README.md, RBAC)`);
    }
    this.generation++;
    clearTimeout(this.timer);
    this.retire();
    this.timer = setTimeout(() => {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'error' });
      void this.run();
    }, wait);
    this.timer.unref();
  }

  /** Stops the current informer; its own stop() reports an abort 'error', which `current()` ignores. */
  private retire(): void {
    const informer = this.informer;
    this.informer = undefined;
    void informer?.stop();
  }
}

/** The HTTP status of a client-node ApiException (`code`) or a watch error (`statusCode`). */
export function statusOf(err: unknown): unknown {
  return (err as { statusCode?: unknown } | undefined)?.statusCode ?? (err as { code?: unknown } | undefined)?.code;
}

/** An API error in one line: status code, the message's first line, and the cause (e.g. ECONNREFUSED). */
export function describeApiError(err: unknown): string {
  if (err instanceof Error) {
    const code = statusOf(err);
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    // client-node's ApiException message carries the body and headers: the first line says enough.
    return [code !== undefined ? `${code}` : '', err.message.split('\n')[0], cause ? `(${cause})` : ''].filter(Boolean).join(' ');
  }
  return String(err);
}
