// Fuzz: random, truncated and corrupted buffers into the rtnetlink decoders and parsers.
// Every outcome must be a valid result or an error with code EBADMSG, never a crash.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { native, type NlControl, type NlMessage } from '../../src/native/binding.js';
import { parseAddress, parseLink } from '../../src/kernel/link/codec.js';
import { CAPTURED } from './link-fixtures.js';

const SCHEMAS = ['rtnl.link', 'rtnl.addr'] as const;
const SAMPLES = Object.values(CAPTURED).flatMap((d) => d.map((h) => Buffer.from(h, 'hex')));

/** Decodes and parses; returns the results or the error's code. */
function decodeAndParse(schema: string, buf: Uint8Array): string {
  let msgs: Array<NlMessage | NlControl>;
  try {
    msgs = native.decode(schema, buf);
  } catch (e) {
    return (e as { code?: string }).code ?? 'no code';
  }
  expect(Array.isArray(msgs)).toBe(true);
  for (const m of msgs) {
    if (!('header' in m)) {
      expect(typeof m.errno).toBe('number');
      continue;
    }
    try {
      if (schema === 'rtnl.link') {
        const l = parseLink('fuzz', m);
        expect(l.name.length).toBeGreaterThan(0);
      } else {
        const a = parseAddress('fuzz', m);
        if (a) expect(['ipv4', 'ipv6']).toContain(a.family);
      }
    } catch (e) {
      return (e as { code?: string }).code ?? 'no code';
    }
  }
  return 'ok';
}

/** A netlink-looking message: valid nlmsghdr, then random bytes (so the attribute walker is reached). */
const framed = fc.tuple(fc.constantFrom(16, 20, 3, 2), fc.uint8Array({ maxLength: 300 })).map(([type, body]) => {
  const b = Buffer.alloc(16 + body.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(type, 4);
  b.set(body, 16);
  return b;
});

describe('rtnetlink decoders under fuzz', () => {
  it('random buffers', () => {
    fc.assert(
      fc.property(fc.constantFrom(...SCHEMAS), fc.uint8Array({ maxLength: 512 }), (schema, buf) => {
        expect(['ok', 'EBADMSG']).toContain(decodeAndParse(schema, buf));
      }),
      { numRuns: 3000 },
    );
  });

  it('random bodies behind a valid header', () => {
    fc.assert(
      fc.property(fc.constantFrom(...SCHEMAS), framed, (schema, buf) => {
        expect(['ok', 'EBADMSG']).toContain(decodeAndParse(schema, buf));
      }),
      { numRuns: 3000 },
    );
  });

  it('every truncation of every captured datagram', () => {
    for (const sample of SAMPLES) {
      for (let n = 0; n <= sample.length; n++) {
        for (const schema of SCHEMAS) expect(['ok', 'EBADMSG']).toContain(decodeAndParse(schema, sample.subarray(0, n)));
      }
    }
  });

  it('captured datagrams with corrupted bytes', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...SAMPLES),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }),
        fc.constantFrom(...SCHEMAS),
        (sample, edits, schema) => {
          const buf = Buffer.from(sample);
          for (const [at, v] of edits) buf[at % buf.length] = v;
          expect(['ok', 'EBADMSG']).toContain(decodeAndParse(schema, buf));
        },
      ),
      { numRuns: 3000 },
    );
  });
});
