// A watch of a live log over HTTP: the changes held after a position, then new ones as the log
// hands them over (in batches, every 100 ms while someone watches), one line each, until the client
// goes or the timeout ends the response. Used by the API (`kubectl get ... --watch`, watch events)
// and by /debug (one entry a line). A client that does not read is not buffered for without bound:
// past `highWaterBytes` waiting to be sent, its entries are skipped and counted.
import type http from 'node:http';
import type { LiveEntry, LiveLog } from './live-log.js';

/** Whether a GET of a collection is a watch: what is authorized as `watch` is exactly what streams. */
export const isWatch = (url: URL) => ['true', '1'].includes(url.searchParams.get('watch') ?? '');

export interface LiveStream<E extends LiveEntry = LiveEntry> {
  liveLog: LiveLog<E>;
  /** Changes after this seq are sent: 0 for everything held, `liveLog.last` for only what comes. */
  after: number;
  keep: (e: E) => boolean;
  /** The text sent for a change, newline included; `first` for the first one sent. */
  line: (e: E, first: boolean) => string;
  contentType: string;
  /** The watch ends after this long (the client may watch again). */
  timeoutMs: number;
  highWaterBytes?: number;
}

export function streamLiveLog<E extends LiveEntry>(res: http.ServerResponse, s: LiveStream<E>): void {
  const highWater = s.highWaterBytes ?? 1 << 20;
  res.writeHead(200, { 'content-type': s.contentType, 'cache-control': 'no-cache, private' });
  res.flushHeaders();
  let last = s.after;
  let first = true;
  const send = (batch: readonly E[]) => {
    if (res.writableEnded || res.destroyed) return;
    let chunk = '';
    let skipped = 0;
    for (const e of batch) {
      if (e.seq <= last) continue;
      last = e.seq;
      if (!s.keep(e)) continue;
      if (res.writableLength + chunk.length > highWater) skipped++;
      else {
        chunk += s.line(e, first);
        first = false;
      }
    }
    if (chunk !== '') res.write(chunk);
    s.liveLog.skipped('slow', skipped);
  };
  send(s.liveLog.entries(s.after));
  const stop = s.liveLog.subscribe(send);
  let cancelTimeout = () => {};
  const finish = () => {
    stop();
    cancelTimeout();
  };
  // The watch's end waits on its log's clock, as the log's batches do.
  cancelTimeout = s.liveLog.clock.after(s.timeoutMs, () => {
    finish();
    res.end();
  });
  res.on('close', finish);
}
