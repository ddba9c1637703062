// Clients of the demo's Services in the kernel end-to-end tests, run from a network namespace
// (`ns:NAME`) or from the node itself (`node`): fresh connections tallied by the backend that
// answered, and one connection held open.
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

const REPO = new URL('../../../', import.meta.url).pathname;

/** `argv` as run from `from`: `ns:NAME` (under ip netns exec NAME) or `node` (as it is). */
export const runFrom = (from: string, argv: string[]): string[] => (from.startsWith('ns:') ? ['ip', 'netns', 'exec', from.slice(3), ...argv] : argv);

const run = (argv: string[]): string => execFileSync(argv[0]!, argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** `count` fresh connections from namespace `ns` to `target` (`tcp:10.96.0.10:80`, `udp:…`) by the demo's client: backend → count. */
export function fromClient(count: number, target: string, ns = 'kip-client'): Record<string, number> {
  const out = run(['ip', 'netns', 'exec', ns, process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target]);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}

/**
 * `count` HTTP GETs in turn (a new connection each) from `from` to host:port, from each of
 * `sources` (or from the kernel's choice of address): per GET the body ("be1 10.250.0.2": the
 * backend and the client address it saw) or `error:CODE`.
 */
export function httpGets(from: string, host: string, opts: { port?: number; count?: number; timeoutMs?: number; sources?: string[] } = {}): string[] {
  const { port = 80, count = 1, timeoutMs = 1500, sources = [] } = opts;
  const out = run(runFrom(from, [process.execPath, `${REPO}test/kernel/lib/http-gets.mjs`, host, String(port), String(count), String(timeoutMs), ...sources]));
  return out.replace(/\n$/, '').split('\n');
}

/** One attempt of connect-loop.mjs: when it started (epoch ms), how long it took, and its answer or error. */
export interface Attempt {
  t: number;
  ms: number;
  ok: boolean;
  body?: string;
  err?: string;
}

/**
 * A fresh connection (one HTTP GET) from `from` to host:port every `intervalMs` for `durationMs`,
 * each with its own deadline, in the background: resolves to every attempt once the loop is done
 * (read after its output closed, not at its exit, which can come before the last of it).
 */
export function connectLoop(from: string, host: string, port: number, o: { intervalMs: number; durationMs: number; timeoutMs: number }): Promise<Attempt[]> {
  const argv = runFrom(from, [process.execPath, `${REPO}test/kernel/lib/connect-loop.mjs`, host, String(port), String(o.intervalMs), String(o.durationMs), String(o.timeoutMs)]);
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve, reject) =>
    child.on('close', (code) => {
      try {
        if (code !== 0) throw new Error(`exited ${code}`);
        resolve(out.trim().split('\n').map((l) => JSON.parse(l) as Attempt));
      } catch (e) {
        reject(new Error(`client loop from ${from} to ${host}:${port}: ${(e as Error).message}`));
      }
    }),
  );
}

/** The distinct first words of `answers` (the backends, or error:CODE), sorted. */
export const who = (answers: string[]): string[] => [...new Set(answers.map((a) => a.split(' ')[0]!))].sort();

/** answer → how many times it came. */
export function tally(answers: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of answers) out[a] = (out[a] ?? 0) + 1;
  return out;
}

/** A connection held open from a namespace (kip-client unless told), from `source` if given (held-connection.mjs). */
export class Held {
  private readonly proc: ChildProcessWithoutNullStreams;
  private readonly lines: string[] = [];
  private waiter: ((l: string) => void) | null = null;
  constructor(host: string, port = 80, opts: { ns?: string; source?: string } = {}) {
    const { ns = 'kip-client', source = '' } = opts;
    this.proc = spawn('ip', ['netns', 'exec', ns, process.execPath, `${REPO}test/kernel/lib/held-connection.mjs`, host, String(port), source]);
    createInterface({ input: this.proc.stdout }).on('line', (l) => (this.waiter ? (this.waiter(l), (this.waiter = null)) : this.lines.push(l)));
  }
  /** The next line it printed: the backend that answered, `closed`, `reset` or error:…. */
  next(): Promise<string> {
    const l = this.lines.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((r) => (this.waiter = r));
  }
  /** Another request on it (`again`), or its end with a FIN (`close`) or a RST (`reset`): what it printed. */
  send(line: 'again' | 'reset' | 'close'): Promise<string> {
    this.proc.stdin.write(`${line}\n`);
    return this.next();
  }
}
