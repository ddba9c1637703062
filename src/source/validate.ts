// Validation shared by both sources: a raw object of a known kind → the zod-validated object, or
// one reason naming every failing field (`spec.ports[0].port: expected number, received string`).
import type { z } from 'zod';

import { endpointSliceSchema, nodeSchema, serviceSchema } from '../model/k8s.js';
import type { EndpointSlice, Node, Service } from '../model/k8s.js';

/** The kinds a source delivers. */
export type SourceKind = 'Service' | 'EndpointSlice' | 'Node';

/** The validated type of each kind. */
export interface SourceObjects {
  Service: Service;
  EndpointSlice: EndpointSlice;
  Node: Node;
}

const SCHEMAS: { [K in SourceKind]: z.ZodType<SourceObjects[K]> } = {
  Service: serviceSchema,
  EndpointSlice: endpointSliceSchema,
  Node: nodeSchema,
};

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
  const result = SCHEMAS[kind].safeParse(raw);
  if (result.success) return { ok: true, value: result.data };
  const reasons = result.error.issues.map((i) => `${formatPath([...base, ...i.path]) || '(object)'}: ${i.message.replace(/^Invalid input: /, '')}`);
  return { ok: false, reason: reasons.join('; ') };
}

/** `spec.ports[0].port` from a path; '' for the root. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((s, p) => (typeof p === 'number' ? `${s}[${p}]` : s ? `${s}.${String(p)}` : String(p)), '');
}
