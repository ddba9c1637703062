// Helpers for kernel tests: commands, named network namespaces, veth pairs, echo servers
// and a client that counts which backend answered. Only for use inside UML or a fresh netns
// (see guard.ts); every wait is bounded and NetLab removes what a test created.
import { execFile, spawn, type ChildProcess } from 'node:child_process';

/** Options for run(): a time limit, stdin text, and the named netns to run in (default: the current one). */
export interface RunOptions {
  timeoutMs?: number;
  input?: string;
  ns?: string;
}

/** A failed command: its exit code (or signal) and stderr. */
export class RunError extends Error {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly signal: string | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(`${command} failed (${signal ? `signal ${signal}` : `exit ${exitCode}`}): ${stderr.trim() || stdout.trim()}`);
    this.name = 'RunError';
  }
}

const NAME = /^[A-Za-z0-9_.-]{1,32}$/;
const MAX_ATTEMPTS = 10_000;
const MAX_LAB_NETNS = 64;
const MAX_LAB_SERVERS = 64;

function checkName(kind: string, name: string, max = 32): void {
  if (!NAME.test(name) || name.length > max) throw new Error(`bad ${kind} name: ${JSON.stringify(name)}`);
}

/** The argv that runs `file args` inside netns `ns` (or as is when ns is undefined). */
function wrap(ns: string | undefined, file: string, args: readonly string[]): [string, string[]] {
  if (ns === undefined) return [file, [...args]];
  checkName('netns', ns);
  return ['ip', ['netns', 'exec', ns, file, ...args]];
}

/** Runs a program (no shell), resolves to its stdout, rejects with a RunError carrying stderr. */
export function run(file: string, args: readonly string[] = [], opts: RunOptions = {}): Promise<string> {
  const [cmd, argv] = wrap(opts.ns, file, args);
  const shown = [cmd, ...argv].join(' ');
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      argv,
      { timeout: opts.timeoutMs ?? 30_000, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const e = err as NodeJS.ErrnoException & { code?: number | string; signal?: string | null };
        const exitCode = typeof e.code === 'number' ? e.code : null;
        const why = typeof e.code === 'string' ? `${e.code} ${stderr}` : stderr;
        reject(new RunError(shown, exitCode, e.signal ?? null, stdout, why));
      },
    );
    child.stdin?.on('error', () => {}); // EPIPE when the program ignores stdin
    child.stdin?.end(opts.input ?? '');
  });
}

/** Runs a program inside the named network namespace (`ip netns exec`). */
export function inNetns(ns: string, file: string, args: readonly string[] = [], opts: Omit<RunOptions, 'ns'> = {}): Promise<string> {
  return run(file, args, { ...opts, ns });
}

/** Creates the named netns with lo up, replacing a stale one of the same name. */
export async function addNetns(name: string): Promise<void> {
  checkName('netns', name);
  await delNetns(name);
  await run('ip', ['netns', 'add', name]);
  await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
}

/** Deletes the named netns (and the links inside it); a missing one is fine. */
export async function delNetns(name: string): Promise<void> {
  checkName('netns', name);
  const list = await run('ip', ['netns', 'list']);
  if (list.split('\n').some((l) => l.split(' ')[0] === name)) await run('ip', ['netns', 'del', name]);
}

/** One end of a veth pair: its netns (undefined = the current one), link name, CIDR address, default gateway. */
export interface VethEnd {
  ns?: string;
  name: string;
  address?: string;
  gateway?: string;
}

function ipIn(ns: string | undefined, args: string[]): Promise<string> {
  return run('ip', ns === undefined ? args : ['-n', ns, ...args]);
}

/** Creates a veth pair between two namespaces, addresses both ends, brings them up, adds default routes. */
export async function addVethPair(a: VethEnd, b: VethEnd): Promise<void> {
  checkName('link', a.name, 15);
  checkName('link', b.name, 15);
  const end = (e: VethEnd) => [e.name, ...(e.ns === undefined ? [] : ['netns', e.ns])];
  await run('ip', ['link', 'add', ...end(a), 'type', 'veth', 'peer', 'name', ...end(b)]);
  for (const e of [a, b]) {
    if (e.address) await ipIn(e.ns, ['addr', 'add', e.address, 'dev', e.name, 'nodad']);
    await ipIn(e.ns, ['link', 'set', e.name, 'up']);
  }
  for (const e of [a, b]) {
    if (e.gateway) await ipIn(e.ns, ['route', 'replace', 'default', 'via', e.gateway, 'dev', e.name]);
  }
}

/** Deletes a link in a netns (undefined = current); a missing one is fine. */
export async function delLink(name: string, ns?: string): Promise<void> {
  await ipIn(ns, ['link', 'del', name]).catch((e: unknown) => {
    if (!(e instanceof RunError && /Cannot find device|does not exist/.test(e.stderr))) throw e;
  });
}

/** Transport for echo servers and clients. */
export type Proto = 'tcp' | 'udp';

/** Where an echo server listens and what it answers. */
export interface EchoServerOptions {
  ns?: string;
  name: string;
  host: string;
  port: number;
  proto?: Proto;
  /** Append the peer as " ip:port" to each reply (to observe SNAT / source IP preservation). */
  withPeer?: boolean;
  /** The server exits on its own after this long (default 10 min). */
  lifetimeMs?: number;
}

/** A running echo server. */
export interface EchoServer {
  readonly name: string;
  stop(): Promise<void>;
}

// Runs under `node -e`; argv: name host port proto withPeer lifetimeMs. Exits when stdin closes.
const SERVER_JS = `
const [name, host, port, proto, withPeer, lifetime] = process.argv.slice(1);
const reply = (a, p) => withPeer === '1' ? name + ' ' + a + ':' + p : name;
const fail = (e) => { process.stderr.write(String(e && e.message || e)); process.exit(1); };
let srv;
if (proto === 'udp') {
  srv = require('node:dgram').createSocket(host.includes(':') ? 'udp6' : 'udp4');
  srv.on('message', (m, r) => srv.send(reply(r.address, r.port), r.port, r.address));
  srv.on('error', fail);
  srv.bind(Number(port), host, () => process.stdout.write('ready\\n'));
} else {
  srv = require('node:net').createServer((s) => { s.on('error', () => {}); s.end(reply(s.remoteAddress, s.remotePort)); });
  srv.on('error', fail);
  srv.listen(Number(port), host, () => process.stdout.write('ready\\n'));
}
process.stdin.on('end', () => process.exit(0)).resume();
setTimeout(() => process.exit(0), Number(lifetime)).unref();
`;

const liveServers = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of liveServers) c.kill('SIGKILL');
});

/** Starts a TCP/UDP server that answers each connection or datagram with its name; resolves once listening. */
export async function startEchoServer(o: EchoServerOptions): Promise<EchoServer> {
  const proto = o.proto ?? 'tcp';
  const argv = ['-e', SERVER_JS, o.name, o.host, String(o.port), proto, o.withPeer ? '1' : '0', String(o.lifetimeMs ?? 600_000)];
  const [cmd, args] = wrap(o.ns, process.execPath, argv);
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  liveServers.add(child);
  child.stdin.on('error', () => {});
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<void>((res) => child.once('exit', () => { liveServers.delete(child); res(); }));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`echo server ${o.name} not ready after 30 s: ${stderr}`)), 30_000);
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        if (d.includes('ready')) { clearTimeout(timer); resolve(); }
      });
      child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`echo server ${o.name} exited (${code}): ${stderr}`)); });
      child.once('error', (e) => { clearTimeout(timer); reject(e); });
    });
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
  return {
    name: o.name,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** Where and how often connectMany connects. */
export interface ConnectOptions {
  ns?: string;
  host: string;
  port: number;
  proto?: Proto;
  /** Number of connections (new socket, new source port each), at most 10,000. */
  count: number;
  /** Per-attempt limit (default 2 s). */
  timeoutMs?: number;
  /** Bind the client socket to this source address. */
  sourceAddress?: string;
}

// Runs under `node -e`; argv: host port proto count timeoutMs sourceAddress. Prints a JSON array.
const CLIENT_JS = `
const [host, port, proto, count, timeout, src] = process.argv.slice(1);
const once = () => new Promise((done) => {
  let out = '';
  let timer;
  const finish = (r) => { clearTimeout(timer); try { sock.close ? sock.close() : sock.destroy(); } catch {} done(r); };
  let sock;
  if (proto === 'udp') {
    sock = require('node:dgram').createSocket(host.includes(':') ? 'udp6' : 'udp4');
    sock.on('error', (e) => finish('ERR:' + (e.code || e.message)));
    sock.on('message', (m) => finish(m.toString()));
    sock.bind({ address: src || undefined, port: 0 }, () => sock.send('ping', Number(port), host));
  } else {
    sock = require('node:net').connect({ host, port: Number(port), localAddress: src || undefined });
    sock.setEncoding('utf8');
    sock.on('data', (d) => (out += d));
    sock.on('end', () => finish(out));
    sock.on('error', (e) => finish('ERR:' + (e.code || e.message)));
  }
  timer = setTimeout(() => finish(out || 'ERR:TIMEOUT'), Number(timeout));
});
(async () => {
  const replies = [];
  for (let i = 0; i < Number(count); i++) replies.push(await once());
  process.stdout.write(JSON.stringify(replies));
})();
`;

/** Connects `count` times in sequence and resolves to the replies ("ERR:<code>" for a failed attempt). */
export async function connectMany(o: ConnectOptions): Promise<string[]> {
  if (!Number.isInteger(o.count) || o.count < 1 || o.count > MAX_ATTEMPTS) throw new Error(`count must be 1..${MAX_ATTEMPTS}`);
  const per = o.timeoutMs ?? 2_000;
  const argv = ['-e', CLIENT_JS, o.host, String(o.port), o.proto ?? 'tcp', String(o.count), String(per), o.sourceAddress ?? ''];
  const out = await run(process.execPath, argv, { ns: o.ns, timeoutMs: 30_000 + o.count * per });
  return JSON.parse(out) as string[];
}

/** Counts replies by their first word (the server name): { web-1: 5, web-2: 5 }. */
export function tally(replies: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of replies) {
    const key = r.split(' ')[0] ?? r;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** Tracks the namespaces, links and servers a test creates; cleanup() removes them all (call it in afterAll). */
export class NetLab {
  private readonly namespaces: string[] = [];
  private readonly links: Array<{ name: string; ns?: string }> = [];
  private readonly servers: EchoServer[] = [];

  /** Creates a named netns (lo up) owned by this lab. */
  async netns(name: string): Promise<string> {
    if (this.namespaces.length >= MAX_LAB_NETNS) throw new Error(`NetLab: more than ${MAX_LAB_NETNS} namespaces`);
    await addNetns(name);
    this.namespaces.push(name);
    return name;
  }

  /** Creates a veth pair owned by this lab (see addVethPair). */
  async veth(a: VethEnd, b: VethEnd): Promise<void> {
    await addVethPair(a, b);
    this.links.push({ name: a.name, ns: a.ns });
  }

  /** Starts an echo server owned by this lab (see startEchoServer). */
  async echoServer(o: EchoServerOptions): Promise<EchoServer> {
    if (this.servers.length >= MAX_LAB_SERVERS) throw new Error(`NetLab: more than ${MAX_LAB_SERVERS} servers`);
    const s = await startEchoServer(o);
    this.servers.push(s);
    return s;
  }

  /** Stops every server, deletes every link and namespace; reports the first failure after trying all. */
  async cleanup(): Promise<void> {
    const errors: unknown[] = [];
    const attempt = async (f: () => Promise<void>) => f().catch((e: unknown) => void errors.push(e));
    await Promise.all(this.servers.splice(0).map((s) => attempt(() => s.stop())));
    for (const l of this.links.splice(0).reverse()) {
      if (l.ns !== undefined && this.namespaces.includes(l.ns)) continue; // goes away with its netns
      await attempt(() => delLink(l.name, l.ns));
    }
    for (const ns of this.namespaces.splice(0).reverse()) await attempt(() => delNetns(ns));
    if (errors.length > 0) throw errors[0];
  }
}
