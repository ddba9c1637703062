// One proxy per node: an abstract unix socket bound in the network namespace whose kernel state
// (IPVS, ipsets, iptables, links) the proxy owns. The kernel releases it when its holder dies,
// however it dies, so there is no stale lock to take over.
import { createConnection, createServer, type Server } from 'node:net';

/** The default lock: the abstract socket `@kube-ipvs-proxy` (`ss -xlp | grep kube-ipvs-proxy`). */
export const DEFAULT_LOCK_NAME = 'kube-ipvs-proxy';

/** Another process holds the lock; `holderPid` is the pid it reports (in its own pid namespace), if any. */
export class NodeLockError extends Error {
  readonly code = 'ELOCKED';
  constructor(
    readonly lockName: string,
    readonly holderPid: number | null,
  ) {
    super(
      `another kube-ipvs-proxy${holderPid === null ? '' : ` (pid ${holderPid})`} already runs in this network namespace ` +
        `(it holds the abstract unix socket @${lockName}); stop it first`,
    );
    this.name = 'NodeLockError';
  }
}

/** A held lock. */
export interface NodeLock {
  readonly name: string;
  /** Closes the socket; the lock is free once this resolves. */
  release(): Promise<void>;
}

/** Asks the holder of `@name` for its pid (it writes `pid\n` to each connection); null when it does not say. */
function askHolderPid(name: string, timeoutMs = 1000): Promise<number | null> {
  return new Promise((resolve) => {
    let text = '';
    const sock = createConnection({ path: `\0${name}` });
    const done = (pid: number | null) => {
      sock.destroy();
      resolve(pid);
    };
    sock.setTimeout(timeoutMs, () => done(null));
    sock.on('data', (b: Buffer) => {
      text += b.toString('utf8');
      if (text.length > 32) done(null);
    });
    sock.on('end', () => done(/^\d+\n$/.test(text) ? Number(text.trim()) : null));
    sock.on('error', () => done(null));
  });
}

/**
 * Takes the node lock by binding the abstract unix socket `@name` in this network namespace;
 * rejects with {@link NodeLockError} when another process holds it. The socket does not keep
 * the process alive; it answers each connection with this process's pid.
 */
export async function acquireNodeLock(name: string = DEFAULT_LOCK_NAME): Promise<NodeLock> {
  const server: Server = createServer((sock) => {
    sock.on('error', () => {});
    sock.end(`${process.pid}\n`);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path: `\0${name}` }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw new Error(`node lock @${name}: ${(e as Error).message}`, { cause: e });
    throw new NodeLockError(name, await askHolderPid(name));
  }
  server.on('error', () => {});
  server.unref();
  let released: Promise<void> | null = null;
  return {
    name,
    release: () => (released ??= new Promise((resolve) => server.close(() => resolve()))),
  };
}

/**
 * Runs `fn` holding the node lock; when another process holds it, reports that through `onLocked`
 * and returns `lockedCode` without running `fn`.
 */
export async function withNodeLock(fn: () => Promise<number>, onLocked: (e: NodeLockError) => void, opts: { name?: string; lockedCode?: number } = {}): Promise<number> {
  let lock: NodeLock;
  try {
    lock = await acquireNodeLock(opts.name);
  } catch (e) {
    if (!(e instanceof NodeLockError)) throw e;
    onLocked(e);
    return opts.lockedCode ?? 1;
  }
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}
