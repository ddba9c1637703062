// Go-syntax durations ("30s", "1m30s", "500ms", "1.5h"), as kube-proxy's flags and
// KubeProxyConfiguration (metav1.Duration) write them, to and from milliseconds.

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3, // U+00B5 micro sign
  'μs': 1e-3, // U+03BC Greek mu
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

const TERM = /^(\d+(?:\.\d*)?|\.\d+)([a-zµμ]+)/;

/** Parses a Go duration into milliseconds; throws a RangeError whose message is the reason. Negative durations are refused. */
export function parseDuration(text: string): number {
  const bad = (): RangeError => new RangeError(`invalid duration ${JSON.stringify(text)} (use Go syntax, e.g. 30s, 1m30s, 500ms)`);
  let rest = text.trim();
  if (rest.startsWith('-')) throw new RangeError(`duration ${JSON.stringify(text)} must not be negative`);
  if (rest.startsWith('+')) rest = rest.slice(1);
  if (rest === '0') return 0;
  if (rest === '') throw bad();
  let total = 0;
  while (rest !== '') {
    const m = TERM.exec(rest);
    const unit = m === null ? undefined : UNIT_MS[m[2]!];
    if (m === null || unit === undefined) throw bad();
    total += Number(m[1]) * unit;
    rest = rest.slice(m[0].length);
  }
  if (!Number.isFinite(total)) throw bad();
  return total;
}

/** Formats milliseconds the short way a person writes them: 0s, 500ms, 30s, 1m30s, 15m, 2h. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  if (rest > 0) parts.push(`${+rest.toFixed(6)}ms`);
  return parts.join('');
}
