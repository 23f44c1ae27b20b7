// A list+watch that assumes the API server will misbehave. It lists, then watches from the list's
// resourceVersion (with bookmarks, so a quiet watch still advances), re-watching from the last
// version seen when the server ends a watch, relisting on 410 Gone, and starting over with backoff
// on any other error (a 500, connection refused, a watch cut without a word). A periodic relist is
// the watchdog against watches that go quiet. Consumers get the whole current list, never deltas, so
// nothing is lost across a restart; while failing, nothing is emitted and the last list stays in force.
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { Backoff } from '../clock/backoff.js';
import { type Clock, sleep, systemClock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import { ApiError, type KubeApiClient, type QueryParams, type WatchEvent } from './api-client.js';
import type { KubeMetrics, Resource } from './metrics.js';

export interface WatchSpec {
  resource: Resource;
  /** The collection's API path, e.g. /api/v1/namespaces/ns/configmaps: listed and watched alike. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** What a 403 means for the agent and which RBAC it needs, said once at warn. */
  forbidden?: string;
}

/** What the API server answered a list or a watch request (for metrics under the Go agent's names). */
export interface WatchObserver {
  /** A list answered with `code` (200 or a refusal's) and the Status reason ('' for 200), in `seconds`. */
  list(code: number, reason: string, seconds: number): void;
  /** A watch accepted (200) or refused. */
  watch(code: number, reason: string): void;
}

/**
 * One ConfigMap by name. The field selector on the name lets a namespaced Role with resourceNames
 * grant list and watch.
 */
export function configMapSpec(resource: Resource, ref: { namespace: string; name: string }): WatchSpec {
  return {
    resource,
    path: `/api/v1/namespaces/${ref.namespace}/configmaps`,
    fieldSelector: `metadata.name=${ref.name}`,
  };
}

/** Lists what `spec` selects, with the collection's resourceVersion. */
export function listOf<T extends KubernetesObject>(
  client: KubeApiClient,
  spec: WatchSpec,
  signal?: AbortSignal,
): Promise<KubernetesListObject<T>> {
  return client.get<KubernetesListObject<T>>(spec.path, selectors(spec), signal);
}

const selectors = (spec: WatchSpec): QueryParams => ({
  labelSelector: spec.labelSelector,
  fieldSelector: spec.fieldSelector,
});

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
  observer?: WatchObserver;
  /** The watch failed and is retrying: until the next onList the objects may be out of date. */
  onError?: () => void;
  random?: () => number;
  /** What the retries, the watchdog and a watch's deadline wait on (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
}

/** The longest wait between retries of a refused (403) list. */
const forbiddenRetryMs = 15_000;

/** How long the server keeps one watch open: 5 to 10 minutes, as client-go's reflector asks. */
const watchSeconds = (random: () => number) => Math.round(300 * (1 + random()));

export class ResilientWatch<T extends KubernetesObject> {
  private readonly backoff: Backoff;
  private readonly random: () => number;
  private readonly clock: Clock;
  /** Aborts the current run's requests; replaced on every (re)start. */
  private run?: AbortController;
  /** Cancels the pending relist or retry. */
  private cancelTimer = () => {};
  private stopped = false;
  /** A 403 is said once at warn: RBAC does not change by itself, the retries go on at debug. */
  private forbiddenSaid = false;

  constructor(private readonly opts: ResilientWatchOptions<T>) {
    this.random = opts.random ?? Math.random;
    this.clock = opts.clock ?? systemClock;
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 500, capMs: 30_000 }, this.random);
  }

  start(): void {
    this.restart();
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer();
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
    this.cancelTimer();
    this.cancelTimer = this.clock.after(this.opts.resyncMs, () => {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'resync' });
      this.opts.log.debug({ resource: this.resource }, 'periodic relist');
      this.restart();
    });
    this.listAndWatch(run.signal).catch((err: unknown) => {
      if (!run.signal.aborted) this.fail(err);
    });
  }

  private async listAndWatch(signal: AbortSignal): Promise<void> {
    const { client, spec, metrics, observer } = this.opts;
    const started = this.clock.now();
    let list: KubernetesListObject<T>;
    try {
      list = await listOf<T>(client, spec, signal);
    } catch (err) {
      if (err instanceof ApiError)
        observer?.list(err.statusCode, err.status?.reason ?? '', (this.clock.now() - started) / 1000);
      throw err;
    }
    observer?.list(200, '', (this.clock.now() - started) / 1000);
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
      const overdue = new AbortController();
      const cancelOverdue = this.clock.after((seconds + 60) * 1000, () => overdue.abort());
      const opened = this.clock.now();
      const query = {
        ...selectors(spec),
        resourceVersion: version,
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(seconds),
      };
      const onEvent = (event: WatchEvent<T>) => {
        version = event.object.metadata?.resourceVersion ?? version;
        if (event.type === 'BOOKMARK') return;
        const key = keyOf(event.object);
        if (event.type === 'DELETED') objects.delete(key);
        else objects.set(key, event.object);
        metrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
        this.opts.onList([...objects.values()]);
      };
      try {
        await client.watch<T>(
          spec.path,
          query,
          { onEvent, onOpen: () => observer?.watch(200, '') },
          AbortSignal.any([signal, overdue.signal]),
        );
      } catch (err) {
        if (err instanceof ApiError && err.statusCode !== 410)
          observer?.watch(err.statusCode, err.status?.reason ?? '');
        throw err;
      } finally {
        cancelOverdue();
      }
      if (signal.aborted) return;
      if (overdue.signal.aborted)
        throw new Error(`the watch of ${spec.path} went silent past its ${seconds} s timeout`);
      // Ended by the server, as watches are: resume from the last version seen.
      if (this.clock.now() - opened < 1000) {
        const pause = sleep(this.clock, this.opts.rewatchPauseMs ?? 1000);
        signal.addEventListener('abort', pause.cancel, { once: true });
        await pause.done;
        signal.removeEventListener('abort', pause.cancel);
      }
      if (signal.aborted) return;
    }
  }

  private fail(err: unknown): void {
    this.run?.abort();
    this.cancelTimer();
    // 410 Gone: the version watched from was compacted away. The list in hand stays right until a
    // fresh one replaces it, at once: this is how a long quiet watch ends, not a failure.
    if (statusOf(err) === 410) {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'expired' });
      this.opts.log.debug({ resource: this.resource }, 'watch expired (410 Gone): relisting');
      return this.restart();
    }
    this.opts.onError?.();
    const forbidden = statusOf(err) === 403;
    // A grant is picked up within seconds of a RoleBinding, however long the refusals went on.
    const wait = forbidden ? Math.min(this.backoff.next(), forbiddenRetryMs) : this.backoff.next();
    this.opts.metrics.watchErrors.inc({ resource: this.resource });
    this.opts.metrics.watchSynced.set({ resource: this.resource }, 0);
    const fields = { resource: this.resource, error: describeApiError(err), retryInMs: Math.round(wait) };
    if (!forbidden) this.opts.log.warn(fields, 'watch failed; keeping the last known objects and retrying');
    else if (this.forbiddenSaid) this.opts.log.debug(fields, 'still forbidden');
    else {
      this.forbiddenSaid = true;
      const { path } = this.opts.spec;
      const what =
        this.opts.spec.forbidden ??
        `carrying on without it, retrying quietly; grant the agent's service account list and watch there (kube/README.md, RBAC)`;
      this.opts.log.warn({ ...fields, path }, `forbidden to list and watch ${path}: ${what}`);
    }
    this.cancelTimer = this.clock.after(wait, () => {
      this.opts.metrics.watchRestarts.inc({ resource: this.resource, reason: 'error' });
      this.restart();
    });
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
