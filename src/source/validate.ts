// Validation shared by both sources: a raw object of a known kind → the zod-validated object, or
// one reason naming every failing field (`spec.ports[0].port: expected number, received string`).
// Names, namespaces, port names, label and annotation keys follow the API server's rules (names.ts).
// Objects in their plain form skip zod (model/k8s-fast.ts, same result; zod is loaded only for the others, zod.ts).
// The result is compact: zod drops every field the proxy does not read (managedFields, …), and
// the bulky last-applied annotation is dropped after its size was checked.
import type { z } from 'zod';

import { NOT_PLAIN, plainEndpointSlice, plainNode, plainService } from '../model/k8s-fast.js';
import { endpointSliceSchema, nodeSchema, serviceSchema } from '../model/k8s-schemas.js';
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import { checkEndpointSliceNames, checkNodeNames, checkServiceNames, type NameIssue } from './names.js';

/** The kinds a source delivers. */
export type SourceKind = 'Service' | 'EndpointSlice' | 'Node';

/** The validated type of each kind. */
export interface SourceObjects {
  Service: Service;
  EndpointSlice: EndpointSlice;
  Node: Node;
}

const SCHEMAS: { [K in SourceKind]: { safeParse(raw: unknown): z.ZodSafeParseResult<SourceObjects[K]> } } = {
  Service: serviceSchema,
  EndpointSlice: endpointSliceSchema,
  Node: nodeSchema,
};

const NAME_CHECKS: { [K in SourceKind]: (o: SourceObjects[K]) => NameIssue[] } = {
  Service: checkServiceNames,
  EndpointSlice: checkEndpointSliceNames,
  Node: checkNodeNames,
};

/** Annotations dropped from validated objects: nothing reads them and they are large. */
export const DROPPED_ANNOTATIONS = ['kubectl.kubernetes.io/last-applied-configuration'] as const;

/** A reason is cut here (a hostile object must not produce a megabyte log line). */
const MAX_REASON = 2000;

/** True for the kinds a source delivers. */
export function isSourceKind(kind: string): kind is SourceKind {
  return Object.hasOwn(SCHEMAS, kind);
}

/** Validates `raw` as `kind`; field paths in the reason are prefixed with `base` (e.g. `items[2]`). */
export function validate<K extends SourceKind>(
  kind: K,
  raw: unknown,
  base: readonly PropertyKey[] = [],
): { ok: true; value: SourceObjects[K] } | { ok: false; reason: string } {
  // The common case without zod (k8s-fast.ts: the same result, a fraction of the garbage).
  const plain = kind === 'Service' ? plainService(raw) : kind === 'EndpointSlice' ? plainEndpointSlice(raw) : plainNode(raw);
  const result = plain !== NOT_PLAIN ? { success: true as const, data: plain as SourceObjects[K] } : SCHEMAS[kind].safeParse(raw);
  const issues = result.success
    ? NAME_CHECKS[kind](result.data)
    : result.error.issues.map((i) => ({ path: i.path, message: i.message.replace(/^Invalid input: /, '') }));
  if (result.success && issues.length === 0) {
    for (const a of DROPPED_ANNOTATIONS) delete result.data.metadata.annotations[a];
    return { ok: true, value: result.data };
  }
  const reason = issues.map((i) => `${formatPath([...base, ...i.path]) || '(object)'}: ${i.message}`).join('; ');
  return { ok: false, reason: reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON)}… (${issues.length} issues)` : reason };
}

/** `spec.ports[0].port` from a path; '' for the root. Keys that are not identifiers are quoted. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((s, p) => {
    if (typeof p === 'number') return `${s}[${p}]`;
    const k = String(p);
    if (!/^[A-Za-z0-9_.\/-]+$/.test(k)) return `${s}[${JSON.stringify(k.length > 100 ? `${k.slice(0, 100)}…` : k)}]`;
    return s ? `${s}.${k}` : k;
  }, '');
}
