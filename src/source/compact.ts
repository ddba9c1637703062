// Prepares a freshly parsed API object for validation so that what the schema keeps is small:
// managedFields and the last-applied annotation (a whole copy of the object) are dropped; other
// unknown fields (targetRef, ownerReferences, …) are stripped by the schema itself. The object
// is the parser's own, so it is changed in place, not copied. (Interning repeated strings was
// tried: no measurable gain, V8's JSON.parse already shares short string values.)

/** The annotation kubectl apply writes: a whole copy of the object the proxy never reads. */
export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

type Dict = Record<string, unknown>;

const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Slims `raw` in place for validation; see the file comment. */
export function compact<T extends Dict>(raw: T): T {
  const m = raw.metadata;
  if (isDict(m)) {
    delete m.managedFields;
    if (isDict(m.annotations) && LAST_APPLIED in m.annotations) delete m.annotations[LAST_APPLIED];
  }
  return raw;
}
