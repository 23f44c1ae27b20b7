// One dial: what the hub asked (a DIAL_REQ's destination, through which proxy-server) and what came
// of it (the rule and address, the result, and once closed its bytes and how it closed). The
// connection table makes it when the DIAL_REQ arrives and fills it in as the dial goes, a connected
// dial's connection counts its bytes into it, and the dial log keeps it by reference: one record per
// dial. What each shown field means is said once, in `dialSchema`; the dial log's entries, the API's
// Dial objects, their Table columns and their OpenAPI schema are built from this type and that table.
import type { DialRoute } from '../dial-policy/contract.js';

/** `denied`: by the dial policy, before any connection attempt; a target's refusal (ECONNREFUSED) is an `error`. */
export type DialResult = 'connected' | 'denied' | 'error' | 'cancelled';
export const dialResults: readonly DialResult[] = ['connected', 'denied', 'error', 'cancelled'];

export class Dial {
  /** Its place in the dial log (the seq of its first change); 0 until logged. */
  id = 0;
  /** The seq of its latest change in the dial log. */
  seq = 0;
  connectID?: string = undefined;
  rule?: string = undefined;
  name?: string = undefined;
  address?: string = undefined;
  result: DialResult = 'connected';
  /** Why it did not connect (the error the hub got). */
  reason?: string = undefined;
  /** How long the dial took, ms. */
  dialMs = 0;
  /** Payload bytes each way: the connection adds them as it relays. */
  bytesToTarget = 0;
  bytesFromTarget = 0;
  /** From the dial request to the close, ms; undefined while open. */
  durationMs?: number = undefined;
  closedBy?: string = undefined;

  constructor(
    /** When the DIAL_REQ arrived, ms since the epoch, and performance.now() (for the durations). */
    readonly time: number,
    readonly started: number,
    readonly server: string,
    /** host:port as the hub asked. */
    readonly destination: string,
  ) {}

  /** The dial settled: how, and the way it went. */
  settle(result: DialResult, reason: string | undefined, route: DialRoute, connectID?: string): void {
    this.result = result;
    this.reason = reason;
    this.rule = route.rule;
    this.name = route.name;
    this.address = route.address;
    this.connectID = connectID;
    this.dialMs = performance.now() - this.started;
  }

  /** Its connection closed. */
  close(closedBy: string): void {
    this.closedBy = closedBy;
    this.durationMs = performance.now() - this.started;
  }

  get open(): boolean {
    return this.result === 'connected' && this.durationMs === undefined;
  }
}

/** A dial as it is shown (/debug/dials, the API): its fields, and whether it is open. */
export type DialView = Omit<Dial, 'id' | 'seq' | 'started' | 'settle' | 'close'>;

/** What a shown field is: where the API puts it (spec: what the hub asked; status: what came of it), its type, its meaning. */
export interface DialField {
  in: 'spec' | 'status';
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date-time';
  description: string;
  enum?: readonly string[];
  /** Absent until known (and left out of what is shown). */
  optional?: true;
}

/** Every field of DialView, described; `optional` exactly where the field may be undefined. */
type DialFields = {
  [K in keyof DialView]-?: DialField & (undefined extends DialView[K] ? { optional: true } : { optional?: never });
};

export const dialSchema = {
  server: { in: 'spec', type: 'string', description: 'The ID of the proxy-server replica that sent the DIAL_REQ.' },
  destination: { in: 'spec', type: 'string', description: 'host:port as the hub asked.' },
  result: {
    in: 'status',
    type: 'string',
    enum: dialResults,
    description:
      'connected, denied (by the dial policy: no rule resolves to the address, nor --allowed-cidrs), error (the dial failed, a target that refused the connection included) or cancelled (DIAL_CLS from the hub).',
  },
  reason: {
    in: 'status',
    type: 'string',
    optional: true,
    description: 'Why it did not connect: the error the hub got.',
  },
  connectID: {
    in: 'status',
    type: 'string',
    optional: true,
    description: 'The connection ID the agent gave it, when connected.',
  },
  rule: {
    in: 'status',
    type: 'string',
    optional: true,
    description: 'The rule the destination resolved through (its source), if one did.',
  },
  name: {
    in: 'status',
    type: 'string',
    optional: true,
    description: "The rule's target name the destination resolved to, for a rule with a name target.",
  },
  address: {
    in: 'status',
    type: 'string',
    optional: true,
    description: 'The address dialled (the one connected, or the one denied).',
  },
  open: { in: 'status', type: 'boolean', description: 'The connection is open.' },
  dialMs: {
    in: 'status',
    type: 'number',
    description: 'How long the dial took (resolve, authorize, connect), in milliseconds.',
  },
  bytesToTarget: {
    in: 'status',
    type: 'integer',
    description: 'Payload bytes the hub sent to the target, once closed.',
  },
  bytesFromTarget: {
    in: 'status',
    type: 'integer',
    description: 'Payload bytes the target sent to the hub, once closed.',
  },
  durationMs: {
    in: 'status',
    type: 'number',
    optional: true,
    description: 'From the dial request to the close, in milliseconds; absent while open.',
  },
  closedBy: {
    in: 'status',
    type: 'string',
    optional: true,
    description: 'How it closed: CLOSE_REQ (the hub), remote EOF, target closed, target error, server stream lost, ...',
  },
  time: { in: 'status', type: 'date-time', description: 'When the hub asked, RFC 3339 with milliseconds.' },
} as const satisfies DialFields;

/** A dial as it is now, as shown: its fields in `dialSchema`'s order, durations to the microsecond, absent ones left out. */
export function viewOf(d: Dial): DialView {
  const view: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(dialSchema) as Array<[keyof DialView, DialField]>) {
    const value = d[key];
    if (value === undefined) continue;
    view[key] = field.type === 'number' ? Math.round((value as number) * 1000) / 1000 : value;
  }
  return view as unknown as DialView;
}
