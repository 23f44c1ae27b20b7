// A list+watch that assumes the API server will misbehave. It lists, then watches from the list's
// resourceVersion (with bookmarks, so a quiet watch still advances), re-watching from the last
// version seen when the server ends a watch, relisting on 410 Gone, and starting over with backoff
// on any other error (a 500, connection refused, a watch cut without a word). A periodic relist is
// the watchdog against watches that go quiet. Consumers get the whole current list, never deltas, so
// nothing is lost across a restart; while failing, nothing is emitted and the last list stays in force.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { Backoff } from '../agent/backoff.js';
import type { Logger } from '../observability/log.js';
import { ApiError, type KubeApiClient, type Query } from './api-client.js';
import type { KubeMetrics, Resource } from './metrics.js';

export interface WatchSpec {
  resource: Resource;
  /** The collection's API path, e.g. /api/v1/namespaces/ns/configmaps: listed and watched alike. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/**
 * One ConfigMap by name. The field selector on the name lets a namespaced Role with resourceNames
 * grant list and watch.
 */
export function configMapSpec(resource: Resource, ref: { namespace: string; name: string }): WatchSpec {
  return { resource, path: `/api/v1/namespaces/${ref.namespace}/configmaps`, fieldSelector: `metadata.name=${ref.name}` };
}

/** Lists what `spec` selects, with the collection's resourceVersion. */
export function listOf<T extends KubernetesObject>(client: KubeApiClient, spec: WatchSpec, signal?: AbortSignal): Promise<KubernetesListObject<T>> {
  return client.get<KubernetesListObject<T>>(spec.path, selectors(spec), signal);
}

const selectors = (spec: WatchSpec): Query => ({ labelSelector: spec.labelSelector, fieldSelector: spec.fieldSelector });

export interface ResilientWatchOptions<T extends KubernetesObject> {
  client: KubeApiClient;
  spec: WatchSpec;
  /** The full current list after the first sync and after every change. */
  onList: (objects: readonly T[]) => void;
  log: Logger;
  metrics: KubeMetrics;
  resyncMs: number;
  backoff?: { initialMs: number; capMs: number };
  /** Pause before re-opening a watch the server ended at once (a proxy that cuts watches must not make a busy loop). */
  rewatchPauseMs?: number;
  random?: () => number;
}

/** How long the server keeps one watch open: 5 to 10 minutes, as client-go's reflector asks. */
const watchSeconds = (random: () => number) => Math.round(300 * (1 + random()));

export class ResilientWatch<T extends KubernetesObject> {
  private readonly backoff: Backoff;
  private readonly random: () => number;
  /** Aborts the current run's requests; replaced on every (re)start. */
  private run?: AbortController;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** A 403 is said once at warn: RBAC does not change by itself, the retries go on at debug. */
  private forbiddenSaid = false;

  constructor(private readonly opts: ResilientWatchOptions<T>) {
    this.random = opts.random ?? Math.random;
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 500, capMs: 30_000 }, this.random);
  }

  start(): void {
    this.restart();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.run?.abort();
  }

  private get resource(): Resource {
    return this.opts.spec.resource;
  }

  /** A fresh list and watch; the watchdog relists after --kube-resync even when all looks well. */
  private restart(): void {
    if (this.stopped) return;
    this.run?.abort();
    const run = new AbortController();
    this.run = run;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'resync' });
      this.opts.log.debug({ resource: this.resource }, 'periodic relist');
      this.restart();
    }, this.opts.resyncMs);
    this.timer.unref();
    this.listAndWatch(run.signal).catch((err: unknown) => {
      if (!run.signal.aborted) this.fail(err);
    });
  }

  private async listAndWatch(signal: AbortSignal): Promise<void> {
    const { client, spec, metrics } = this.opts;
    const list = await listOf<T>(client, spec, signal);
    if (signal.aborted) return;
    const objects = new Map<string, T>(list.items.map((o) => [keyOf(o), o]));
    let version = list.metadata?.resourceVersion ?? '';
    this.backoff.reset();
    this.forbiddenSaid = false;
    metrics.watchSynced.set({ resource: this.resource }, 1);
    metrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
    this.opts.onList([...objects.values()]);
    for (;;) {
      const seconds = watchSeconds(this.random);
      // A watch the server should have ended by now (plus a minute) went dead without a word: start over.
      const overdue = AbortSignal.timeout((seconds + 60) * 1000);
      const opened = Date.now();
      const query = { ...selectors(spec), resourceVersion: version, allowWatchBookmarks: 'true', timeoutSeconds: String(seconds) };
      await client.watch<T>(spec.path, query, (event) => {
        version = event.object.metadata?.resourceVersion ?? version;
        if (event.type === 'BOOKMARK') return;
        const key = keyOf(event.object);
        if (event.type === 'DELETED') objects.delete(key);
        else objects.set(key, event.object);
        metrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
        this.opts.onList([...objects.values()]);
      }, AbortSignal.any([signal, overdue]));
      if (signal.aborted) return;
      if (overdue.aborted) throw new Error(`the watch of ${spec.path} went silent past its ${seconds} s timeout`);
      // Ended by the server, as watches are: resume from the last version seen.
      if (Date.now() - opened < 1000) await sleep(this.opts.rewatchPauseMs ?? 1000, undefined, { signal }).catch(() => {});
      if (signal.aborted) return;
    }
  }

  private fail(err: unknown): void {
    this.run?.abort();
    clearTimeout(this.timer);
    // 410 Gone: the version watched from was compacted away. The list in hand stays right until a
    // fresh one replaces it, at once: this is how a long quiet watch ends, not a failure.
    if (statusOf(err) === 410) {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'expired' });
      this.opts.log.debug({ resource: this.resource }, 'watch expired (410 Gone): relisting');
      return this.restart();
    }
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
    this.timer = setTimeout(() => {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'error' });
      this.restart();
    }, wait);
    this.timer.unref();
  }
}

const keyOf = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/** The HTTP status of an ApiError (or of another error that carries one). */
export function statusOf(err: unknown): unknown {
  return err instanceof ApiError ? err.statusCode : (err as { statusCode?: unknown } | undefined)?.statusCode;
}

/** An API error in one line: status code and reason, the server's message, and the cause (e.g. ECONNREFUSED). */
export function describeApiError(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    return [err.message.split('\n')[0], cause ? `(${cause})` : ''].filter(Boolean).join(' ');
  }
  return String(err);
}
