// What a client call came to, in the form the case tables write it: `'ok'`, an error code, or
// the error's fields that matter (code, errno, op, object, message).
import { expect } from 'vitest';

/** An expected outcome: 'ok', an error code, or some of the error's fields. */
export type Outcome = string | { code: string; errno?: number; op?: string; object?: string; message?: RegExp };

/** One result of a batch, or the error a call threw. */
type Actual = { ok: true } | { ok: false; error: unknown } | { error: unknown };

/** The actual outcome in the shape of the expected one (only the fields it names). */
export function outcomeOf(actual: Actual, want: Outcome): unknown {
  if ('ok' in actual && actual.ok) return 'ok';
  const e = (actual as { error: unknown }).error as { code?: unknown; errno?: unknown; op?: unknown; object?: unknown; message?: unknown };
  if (typeof want === 'string') return typeof e?.code === 'string' ? e.code : String(e);
  const out: Record<string, unknown> = { code: e?.code };
  for (const k of ['errno', 'op', 'object'] as const) if (want[k] !== undefined) out[k] = e?.[k];
  if (want.message !== undefined) out.message = want.message.test(String(e?.message)) ? want.message : e?.message;
  return out;
}

/** Asserts a batch's results, one per op or entry, naming the case and step on failure. */
export function expectOutcomes(actual: readonly Actual[], want: readonly Outcome[], where: string): void {
  expect(actual.map((a, i) => outcomeOf(a, want[i] ?? 'ok')), where).toEqual(want);
}

/** Runs `call`; 'ok' with its value, or the error it threw. */
export async function attempt<T>(call: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}
