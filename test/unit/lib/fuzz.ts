// The decoder fuzzing every codec test runs: truncations, random bytes, random corruption.
import fc from 'fast-check';

/** A captured message and the schema that decodes it. */
export interface FuzzSample {
  schema: string;
  buf: Buffer;
}

/** Every truncation of every sample (up to `maxLength` bytes) through `check`. */
export function fuzzTruncations(samples: readonly FuzzSample[], check: (s: FuzzSample) => void, maxLength = 4096): void {
  for (const { schema, buf } of samples) for (let n = 0; n < Math.min(buf.length, maxLength); n++) check({ schema, buf: buf.subarray(0, n) });
}

/** Random buffers for each schema, then samples with up to 8 random bytes overwritten, through `check`. */
export function fuzzRandom(schemas: readonly string[], samples: readonly FuzzSample[], check: (s: FuzzSample) => void, numRuns = 2000): void {
  fc.assert(
    fc.property(fc.constantFrom(...schemas), fc.uint8Array({ maxLength: 512 }), (schema, bytes) => check({ schema, buf: Buffer.from(bytes) })),
    { numRuns },
  );
  fc.assert(
    fc.property(
      fc.constantFrom(...samples),
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }),
      ({ schema, buf }, flips) => {
        const copy = Buffer.from(buf);
        for (const [at, v] of flips) copy[at % copy.length] = v;
        check({ schema, buf: copy });
      },
    ),
    { numRuns },
  );
}
