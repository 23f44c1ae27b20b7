// The fields a selector may name over the query log (live-log/selector.ts parses the syntax): the
// object's paths (spec.name, status.rcode, ...) or their last part (name, rcode, ...). Names compare
// as DNS does (case-insensitive, a trailing dot ignored), types and rcodes case-insensitively, the
// rest exactly. Pure.
import { exact, type Fields, lower, nameField, upper } from '../live-log/selector.js';
import type { QueryEntry } from './query-log.js';

const dnsName = (v: string) => v.toLowerCase().replace(/\.$/, '');

export const queryFields: Fields<QueryEntry> = {
  'metadata.name': nameField,
  'spec.name': { aliases: ['name'], value: (e) => e.name, normalize: dnsName },
  'spec.type': { aliases: ['type'], value: (e) => e.type, normalize: upper },
  'spec.client': { aliases: ['client'], value: (e) => e.client, normalize: exact },
  'spec.transport': { aliases: ['transport'], value: (e) => e.transport, normalize: lower },
  'status.rcode': { aliases: ['rcode'], value: (e) => e.rcode, normalize: upper },
  'status.source': { aliases: ['source'], value: (e) => e.source, normalize: lower },
  'status.rule': { aliases: ['rule'], value: (e) => e.rule ?? '', normalize: exact },
};
