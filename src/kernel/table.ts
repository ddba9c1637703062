// Reading a DumpTable (a dump's replies decoded into columns off the JS thread) row by row.
import type { DumpTable, TableColumn } from '../native/binding.js';

type Value = number | string | Uint8Array | true;
type Get = (row: number) => Value | undefined;

/** A column's value at a row; undefined where the reply lacked the attribute. Bytes are views into the table. */
function getter(c: TableColumn): Get {
  switch (c.kind) {
    case 'number':
      return (r) => (c.present[r] ? c.numbers[r] : undefined);
    case 'string':
      return (r) => (c.present[r] ? c.dict[c.codes[r]!] : undefined);
    case 'bytes':
      return (r) => (c.present[r] ? c.bytes.subarray(c.offsets[r]!, c.offsets[r + 1]!) : undefined);
    case 'flag':
      return (r) => (c.present[r] ? true : undefined);
  }
}

interface Field {
  name: string;
  get?: Get;
  nest?: Field[];
}

function build(fields: readonly Field[], row: number): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  for (const f of fields) {
    const v = f.get ? f.get(row) : build(f.nest!, row);
    if (v !== undefined) (out ??= {})[f.name] = v;
  }
  return out;
}

/**
 * The rows of `table` under the attribute `prefix` (e.g. `service`; none: every attribute but the
 * fixed header) as plain objects shaped like the object decoder's nests (`{ af, addr, stats:
 * { conns } }`; only the attributes present), except that bytes are Uint8Array views, 64-bit
 * integers numbers, and lists left out (they are tables of their own: `lists`).
 */
export function rowReader(table: DumpTable, prefix = ''): (row: number) => Record<string, unknown> {
  const root: Field[] = [];
  const start = prefix ? `${prefix}.` : '';
  for (const [path, column] of Object.entries(table.columns)) {
    if (prefix ? !path.startsWith(start) : path.startsWith('header.')) continue;
    const names = path.slice(start.length).split('.');
    let level = root;
    for (const name of names.slice(0, -1)) {
      let nest = level.find((f) => f.name === name && f.nest);
      if (!nest) level.push((nest = { name, nest: [] }));
      level = nest.nest!;
    }
    level.push({ name: names.at(-1)!, get: getter(column) });
  }
  return (row) => build(root, row) ?? {};
}

/** The rows of dump `k` of a dumpMany table. */
export function dumpRows(table: DumpTable, k: number): number[] {
  const starts = table.starts ?? Uint32Array.of(0, table.rows);
  const out: number[] = [];
  for (let r = starts[k]!; r < starts[k + 1]!; r++) out.push(r);
  return out;
}
