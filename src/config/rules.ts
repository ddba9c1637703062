// The checks behind ConfigSchema and the KubeProxyConfiguration file: small composable rules,
// each returning the value to keep or recording an issue at its path. Not zod: the
// configuration is read before anything else runs, and importing zod costs more than the rest
// of the start-up up to the first API request (about 0.65 s and 6 MiB of heap inside UML).
// zod still validates Kubernetes objects and kernel data that are not plain, loaded on first use (zod.ts).

/** Where an issue is: object keys and array indices from the document's root. */
export type IssuePath = (string | number)[];

/** One problem found: its path and the reason. */
export interface Issue {
  path: IssuePath;
  message: string;
}

/** A check of one value at `at`: the value to keep, or `undefined` after recording issues. */
export type Rule<T> = (value: unknown, at: IssuePath, issues: Issue[]) => T | undefined;

/** The result of a whole check, shaped like zod's safeParse for its callers. */
export type Checked<T> = { success: true; data: T } | { success: false; error: { issues: Issue[] } };

/** A value as error messages show it; `nothing` for a missing one. */
export function shown(v: unknown): string {
  return v === undefined ? 'nothing' : JSON.stringify(v);
}

function fail(issues: Issue[], at: IssuePath, message: string): undefined {
  issues.push({ path: at, message });
  return undefined;
}

type TypeName = 'string' | 'number' | 'boolean';
type TypeOf<N extends TypeName> = N extends 'string' ? string : N extends 'number' ? number : boolean;

/** A value of a JSON type (numbers finite) that passes every `check` (each returns a reason or nothing). */
export function typed<N extends TypeName>(type: N, ...checks: ((v: TypeOf<N>) => string | undefined)[]): Rule<TypeOf<N>> {
  return (v, at, issues) => {
    if (typeof v !== type || (type === 'number' && !Number.isFinite(v))) return fail(issues, at, `expected ${type}, got ${shown(v)}`);
    for (const check of checks) {
      const reason = check(v as TypeOf<N>);
      if (reason !== undefined) return fail(issues, at, reason);
    }
    return v as TypeOf<N>;
  };
}

/** An integer within [min, max]; `reason` when it is not. */
export function integer(min: number, max: number, reason: string): Rule<number> {
  return typed('number', (n) => (Number.isInteger(n) && n >= min && n <= max ? undefined : reason));
}

/** Exactly `value`. */
export function literal<T extends string>(value: T): Rule<T> {
  return (v, at, issues) => (v === value ? value : fail(issues, at, `expected ${JSON.stringify(value)}, got ${shown(v)}`));
}

/** One of `values`; the message names the unknown value and the valid ones. */
export function oneOf<T extends string>(values: readonly T[], what: string): Rule<T> {
  return (v, at, issues) =>
    (values as readonly unknown[]).includes(v) ? (v as T) : fail(issues, at, `unknown ${what} ${shown(v)} (valid: ${values.join(', ')})`);
}

/** Either rule's value, tried in order; the first rule's issue when neither matches. */
export function either<A, B>(a: Rule<A>, b: Rule<B>): Rule<A | B> {
  return (v, at, issues) => {
    const tried: Issue[] = [];
    const first = a(v, at, tried);
    if (first !== undefined) return first;
    const second = b(v, at, []);
    if (second !== undefined) return second;
    issues.push(...tried);
    return undefined;
  };
}

/** Any value, kept as is. */
export const anything: Rule<unknown> = (v) => v;

/** An array whose items pass `item`; `whole` then checks the list (a reason or nothing). */
export function listOf<T>(item: Rule<T>, whole?: (items: T[], at: IssuePath, issues: Issue[]) => void): Rule<T[]> {
  return (v, at, issues) => {
    if (!Array.isArray(v)) return fail(issues, at, `expected array, got ${shown(v)}`);
    const before = issues.length;
    const out = v.map((x, i) => item(x, [...at, i], issues));
    if (issues.length > before) return undefined;
    whole?.(out as T[], at, issues);
    return issues.length > before ? undefined : (out as T[]);
  };
}

/** An object whose every value passes `value`. */
export function recordOf<T>(value: Rule<T>): Rule<Record<string, T>> {
  return (v, at, issues) => {
    if (!isPlainObject(v)) return fail(issues, at, `expected object, got ${shown(v)}`);
    const before = issues.length;
    const out: Record<string, T> = {};
    for (const [k, x] of Object.entries(v)) out[k] = value(x, [...at, k], issues) as T;
    return issues.length > before ? undefined : out;
  };
}

/** `null` kept; anything else checked by `rule`. */
export function nullable<T>(rule: Rule<T>): Rule<T | null> {
  return (v, at, issues) => (v === null ? null : rule(v, at, issues));
}

/** A field of an object shape: its rule, and what an absent (undefined) value becomes. */
export interface Field<T> {
  rule: Rule<T>;
  /** An absent field stays absent (otherwise, without `absent`, it is required: `rule` sees undefined). */
  optional?: boolean;
  /** Makes the value of an absent field (a fresh one each time). */
  absent?: () => T;
  /** The absent value goes through `rule` too (zod's prefault: nested defaults). */
  checkAbsent?: boolean;
}

/** An optional field: absent stays absent. */
export const optional = <T>(rule: Rule<T>): Field<T> => ({ rule, optional: true });
/** A field with a default for an absent value. */
export const withDefault = <T>(rule: Rule<T>, value: () => T): Field<T> => ({ rule, absent: value });
/** A nested object field whose absent value is `{}` checked by its rule (every default inside). */
export const nested = <T>(rule: Rule<T>): Field<T> => ({ rule, absent: () => ({}) as T, checkAbsent: true });

type Shape<T> = { [K in keyof T]-?: Field<T[K]> };

/**
 * An object of `shape`: each field checked in order, absent ones defaulted, others dropped (or,
 * when `strict`, reported as unknown fields); `refine` then sees the whole valid object.
 */
export function object<T extends object>(shape: Shape<T>, opts: { strict?: boolean; refine?: (o: T, issues: Issue[]) => void } = {}): Rule<T> {
  const keys = Object.keys(shape) as (keyof T & string)[];
  return (v, at, issues) => {
    if (!isPlainObject(v)) return fail(issues, at, `expected object, got ${shown(v)}`);
    const before = issues.length;
    const out = {} as T;
    for (const k of keys) {
      const field = shape[k] as Field<unknown>;
      let x = v[k];
      if (x === undefined && field.optional) continue;
      if (x === undefined && field.absent) {
        x = field.absent();
        if (!field.checkAbsent) {
          out[k] = x as T[typeof k];
          continue;
        }
      }
      const kept = field.rule(x, [...at, k], issues);
      if (kept !== undefined) out[k] = kept as T[typeof k];
    }
    if (opts.strict) {
      for (const k of Object.keys(v)) if (!Object.hasOwn(shape, k)) fail(issues, [...at, k], 'unknown field');
    }
    if (issues.length > before) return undefined;
    opts.refine?.(out, issues);
    return issues.length > before ? undefined : out;
  };
}

/** Runs `rule` over a whole document. */
export function check<T>(rule: Rule<T>, input: unknown): Checked<T> {
  const issues: Issue[] = [];
  const data = rule(input, [], issues);
  return issues.length === 0 ? { success: true, data: data as T } : { success: false, error: { issues } };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
