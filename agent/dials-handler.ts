// `/debug/dials` on the health port: the dial log as live-log/debug-handler.ts serves a live log. Its
// guard is its own permission (who reached what is not the rules): get on --debug-auth-path + "/dials".
import { liveLogHandler, type Shown } from '../live-log/debug-handler.js';
import type { RouteHandler } from '../observability/health-server.js';
import type { DialEntry, DialLog } from './dial-log.js';
import { dialFields } from './dial-selector.js';

/** What /debug/dials sends for an entry (`spoke-agent dials` reads it). */
export type ShownDial = Shown<DialEntry>;

export const dialsHandler = (dialLog: DialLog | undefined): RouteHandler =>
  liveLogHandler(dialLog, { resource: 'dials', fields: dialFields, off: 'the dial log is off: --dial-log-size=0' });
