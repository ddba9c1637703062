// Reading a DumpTable (a dump's replies decoded into columns off the JS thread) row by row.
import type { DumpTable, TableColumn } from '../native/binding.js';

/** A column's value at a row; undefined where the reply lacked the attribute. */
export type Column<T> = (row: number) => T | undefined;

const absent = (): undefined => undefined;

function columnOf<K extends TableColumn['kind']>(t: DumpTable, path: string, kind: K): Extract<TableColumn, { kind: K }> | undefined {
  const c = t.columns[path];
  if (c === undefined) return undefined;
  if (c.kind !== kind) throw new Error(`table column ${path} holds ${c.kind}, not ${kind}`);
  return c as Extract<TableColumn, { kind: K }>;
}

export function numberColumn(t: DumpTable, path: string): Column<number> {
  const c = columnOf(t, path, 'number');
  return c ? (r) => (c.present[r] ? c.numbers[r] : undefined) : absent;
}

export function stringColumn(t: DumpTable, path: string): Column<string> {
  const c = columnOf(t, path, 'string');
  return c ? (r) => (c.present[r] ? c.dict[c.codes[r]!] : undefined) : absent;
}

/** Bytes as a view into the table. */
export function bytesColumn(t: DumpTable, path: string): Column<Uint8Array> {
  const c = columnOf(t, path, 'bytes');
  return c ? (r) => (c.present[r] ? c.bytes.subarray(c.offsets[r]!, c.offsets[r + 1]!) : undefined) : absent;
}

/** The first four bytes of a bytes column as an unsigned integer (no view made); undefined when shorter. */
export function u32Column(t: DumpTable, path: string, littleEndian: boolean): Column<number> {
  const c = columnOf(t, path, 'bytes');
  if (!c) return absent;
  const view = new DataView(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength);
  return (r) => (c.present[r] && c.offsets[r + 1]! - c.offsets[r]! >= 4 ? view.getUint32(c.offsets[r]!, littleEndian) : undefined);
}

function anyColumn(t: DumpTable, path: string): Column<number | string | Uint8Array | true> {
  const c = t.columns[path]!;
  if (c.kind === 'number') return numberColumn(t, path);
  if (c.kind === 'string') return stringColumn(t, path);
  if (c.kind === 'bytes') return bytesColumn(t, path);
  return (r) => (c.present[r] ? true : undefined);
}

interface Field {
  name: string;
  get?: Column<unknown>;
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
 * The rows of `table` under the attribute `prefix` (e.g. `header`; none: every attribute but the
 * fixed header) as plain objects shaped like the object decoder's nests (`{ ip: { v4 }, port }`;
 * only the attributes present), except that bytes are Uint8Array views, 64-bit integers numbers,
 * and lists left out (they are tables of their own: `lists`).
 */
export function rowReader(table: DumpTable, prefix = ''): (row: number) => Record<string, unknown> {
  const root: Field[] = [];
  const start = prefix ? `${prefix}.` : '';
  for (const path of Object.keys(table.columns)) {
    if (prefix ? !path.startsWith(start) : path.startsWith('header.')) continue;
    const names = path.slice(start.length).split('.');
    let level = root;
    for (const name of names.slice(0, -1)) {
      let nest = level.find((f) => f.name === name && f.nest);
      if (!nest) level.push((nest = { name, nest: [] }));
      level = nest.nest!;
    }
    level.push({ name: names.at(-1)!, get: anyColumn(table, path) });
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
