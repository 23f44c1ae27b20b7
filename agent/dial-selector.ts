// The fields a selector may name over the dial log (live-log/selector.ts parses the syntax): the
// object's paths (spec.destination, status.result, ...) or their last part. Results and rules
// compare exactly, destinations as host names do (case-insensitive). Pure.
import { exact, type Fields, lower, nameField } from '../live-log/selector.js';
import type { DialEntry } from './dial-log.js';

export const dialFields: Fields<DialEntry> = {
  'metadata.name': nameField,
  'spec.destination': { aliases: ['destination'], value: (e) => e.destination, normalize: lower },
  'spec.server': { aliases: ['server'], value: (e) => e.server, normalize: exact },
  'status.result': { aliases: ['result'], value: (e) => e.result, normalize: lower },
  'status.rule': { aliases: ['rule'], value: (e) => e.rule ?? '', normalize: exact },
  'status.address': { aliases: ['address'], value: (e) => e.address ?? '', normalize: exact },
  'status.connectID': { aliases: ['connectID'], value: (e) => e.connectID ?? '', normalize: exact },
};
