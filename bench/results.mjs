// The results table of docs/benchmarks.md, between `<!-- results:begin -->` and `<!-- results:end -->`.
// Each benchmark hands its figures to recordResults(); only the rows with those ids are replaced (a new
// id goes after the last row of its benchmark), so the micro benchmarks and the cluster benchmark each
// regenerate their own part. A row's id is an HTML comment in its first cell.
//   KIP_BENCH_RESULTS=FILE  write to FILE instead; KIP_BENCH_RESULTS=off  write nothing
//   KIP_BENCH_STAMP=TEXT    the commit stamp (bench/run.mjs sets it once, for every benchmark it starts)
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const BEGIN = '<!-- results:begin -->';
export const END = '<!-- results:end -->';
export const HEADER = ['| benchmark | size | ours | reference | ratio | goal | measured |', '|---|---|---|---|---|---|---|'];
const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const RESULTS_FILE = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const ID = /<!-- id:([\w.,:=+-]+) -->/;

/** `git rev-parse --short HEAD`, plus "+dirty" when tracked files differ from it; "unknown" without git. */
export function commitStamp(cwd = ROOT) {
  if (process.env.KIP_BENCH_STAMP) return process.env.KIP_BENCH_STAMP;
  const git = (...args) => spawnSync('git', ['-c', `safe.directory=${cwd}`, ...args], { cwd, encoding: 'utf8' });
  const head = git('rev-parse', '--short', 'HEAD');
  if (head.status !== 0 || !head.stdout.trim()) return 'unknown';
  const status = git('status', '--porcelain', '--untracked-files=no');
  return `${head.stdout.trim()}${status.status === 0 && status.stdout.trim() ? '+dirty' : ''}`;
}

/** The UTC date, YYYY-MM-DD. */
export const utcDate = (d = new Date()) => d.toISOString().slice(0, 10);

/** A ratio as the table prints it: 0.061×, 1.22×. */
export const ratio = (ours, reference) => `${(ours / reference).toFixed(ours / reference < 0.1 ? 3 : 2)}×`;

/**
 * One table line. `row`: { id, benchmark, size, ours, reference?, ratio?, goal? } (strings; id: letters,
 * digits and `.,:=+-`, unique per figure and size, its first segment the benchmark's name).
 */
export function formatRow(row, measured) {
  if (!row.id || !/^[\w.,:=+-]+$/.test(row.id)) throw new Error(`benchmark result ${JSON.stringify(row.benchmark)}: invalid id ${JSON.stringify(row.id)}`);
  const cell = (v) => String(v ?? '–').replaceAll('|', '\\|').replaceAll('\n', ' ');
  return `| ${cell(row.benchmark)} <!-- id:${row.id} --> | ${[row.size, row.ours, row.reference, row.ratio, row.goal, measured].map(cell).join(' | ')} |`;
}

/** The id of a table line, or null (header, separator, anything else). */
export const rowId = (line) => line.match(ID)?.[1] ?? null;

/** `text` with `rows` written into its results table (see the top of this file); throws without the markers. */
export function updateTable(text, rows, measured, file = 'the results file') {
  const b = text.indexOf(BEGIN);
  const e = text.indexOf(END, b);
  if (b < 0 || e < 0) throw new Error(`${file}: no results table (markers ${BEGIN} ... ${END} not found)`);
  const inner = text.slice(b + BEGIN.length, e).split('\n').map((l) => l.trim()).filter(Boolean);
  const lines = inner.some((l) => l.startsWith('|')) ? inner : [...HEADER];
  const seen = new Set();
  for (const row of rows) {
    if (seen.has(row.id)) throw new Error(`benchmark result ${row.id}: given twice`);
    seen.add(row.id);
    const line = formatRow(row, measured);
    const at = lines.findIndex((l) => rowId(l) === row.id);
    if (at >= 0) {
      lines[at] = line;
      continue;
    }
    const group = row.id.split('.')[0];
    let last = -1;
    lines.forEach((l, k) => {
      if (rowId(l)?.split('.')[0] === group) last = k;
    });
    lines.splice(last >= 0 ? last + 1 : lines.length, 0, line);
  }
  return `${text.slice(0, b + BEGIN.length)}\n${lines.join('\n')}\n${text.slice(e)}`;
}

/** Writes `rows` into the results table (KIP_BENCH_RESULTS, default docs/benchmarks.md); returns the file, or null when off. */
export function recordResults(rows, { file = process.env.KIP_BENCH_RESULTS || RESULTS_FILE, stamp = commitStamp(), date = utcDate() } = {}) {
  if (file === 'off' || rows.length === 0) return null;
  const text = readFileSync(file, 'utf8');
  writeFileSync(file, updateTable(text, rows, `${stamp}, ${date}`, file));
  console.log(`  results: ${rows.length} row(s) written to ${file} (${stamp}, ${date})`);
  return file;
}
