// zod, loaded on its first use. Its import is the largest module load of a start-up, while the
// common path needs none of it: plain Services, EndpointSlices and Nodes are decoded by
// model/k8s-fast.ts, kernel values checked by hand (kernel/ipvs/types.ts, kernel/ipset/client.ts).
// zod decides, and names the field, for whatever those do not pass. It is required (its CommonJS
// build, synchronously) the first time a schema is used, so every caller stays synchronous.
import { createRequire } from 'node:module';

import type { z } from 'zod';

/** zod's `z`: what schemas are made with. */
export type Zod = typeof z;

let loaded: Zod | undefined;

/** zod's `z`, loaded on the first call. */
export function zod(): Zod {
  return (loaded ??= (createRequire(import.meta.url)('zod') as { z: Zod }).z);
}

/** True once zod has been loaded (the tests of the start-up path). */
export function zodLoaded(): boolean {
  return loaded !== undefined;
}

/** `build()`'s value, made on the first call of the returned function. */
export function lazy<T>(build: () => T): () => T {
  let value: { v: T } | undefined;
  return () => (value ??= { v: build() }).v;
}

/** A zod schema made on first use; `schema()` is the schema itself. */
export interface LazySchema<S extends z.ZodType> {
  schema(): S;
  parse(value: unknown): z.output<S>;
  safeParse(value: unknown): z.ZodSafeParseResult<z.output<S>>;
}

/** The schema `build` makes (with zod(), loaded then) on the first call of one of its methods. */
export function lazySchema<S extends z.ZodType>(build: () => S): LazySchema<S> {
  const schema = lazy(build);
  return { schema, parse: (v) => schema().parse(v) as z.output<S>, safeParse: (v) => schema().safeParse(v) as z.ZodSafeParseResult<z.output<S>> };
}
