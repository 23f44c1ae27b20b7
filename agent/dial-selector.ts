// The fields a selector may name over the dial log (live-log/selector.ts parses the syntax): the
// object's paths (spec.destination, status.result, ...: where dialSchema puts each field) or their
// last part. Results and rules compare exactly, destinations as host names do (case-insensitive). Pure.
import { exact, type Fields, lower, nameField } from '../live-log/selector.js';
import { dialSchema } from './dial.js';
import type { DialEntry } from './dial-log.js';

/** A field's path in the API's Dial object. */
const path = (key: keyof typeof dialSchema) => `${dialSchema[key].in}.${key}`;

export const dialFields: Fields<DialEntry> = {
  'metadata.name': nameField,
  [path('destination')]: { aliases: ['destination'], value: (e) => e.destination, normalize: lower },
  [path('server')]: { aliases: ['server'], value: (e) => e.server, normalize: exact },
  [path('result')]: { aliases: ['result'], value: (e) => e.result, normalize: lower },
  [path('rule')]: { aliases: ['rule'], value: (e) => e.rule ?? '', normalize: exact },
  [path('address')]: { aliases: ['address'], value: (e) => e.address ?? '', normalize: exact },
  [path('connectID')]: { aliases: ['connectID'], value: (e) => e.connectID ?? '', normalize: exact },
};
