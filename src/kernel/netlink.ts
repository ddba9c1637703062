// A netlink connection over the addon: one owner at a time, results as NetlinkErrors.
import {
  constantsOf,
  native,
  type BatchLimits,
  type DumpOptions,
  type DumpTable,
  type NativeSocket,
  type NlMessage,
  type NlRequest,
} from '../native/binding.js';
import { NetlinkError, fromNative } from './errors.js';
import { SerialQueue } from '../serial.js';

/** What one op of a batch came to. */
export type OpOutcome = { ok: true; replies: readonly NlMessage[] } | { ok: false; error: NetlinkError; echo?: NlMessage };

/** The outcome of every op that succeeded without replies: one object, not one per op. */
const DONE: OpOutcome = Object.freeze({ ok: true, replies: Object.freeze([]) });

/** A success as a shared object (a batch of changes is mostly these): callers never change it. */
export const OK: { readonly ok: true } = Object.freeze({ ok: true });

/**
 * Limits of a change batch (BatchLimits.errorsOnly): the kernel acks only each sendmsg chunk's
 * last message and answers the others only when they fail, one ack skb per chunk instead of one
 * per op. The IPVS changes and the link client's address batches (one address per Service IP) use it.
 */
export const ERRORS_ONLY = Object.freeze({ errorsOnly: true } as const);

/** Netlink messages laid out by the caller: `count` of them back to back in `bytes` (see wire.ts). */
export interface EncodedRequests {
  bytes: Uint8Array;
  count: number;
}

/** How to name an op of a batch in its error: the op and the object it was about. */
export interface OpLabel {
  op: string;
  object?: string;
}

/** A netlink socket whose calls are queued so that exactly one is in flight at a time. */
export class NetlinkConnection {
  private readonly socket: NativeSocket;
  private readonly queue = new SerialQueue();

  /** Opens a socket for `protocol` (NETLINK_GENERIC, NETLINK_NETFILTER, NETLINK_ROUTE). */
  constructor(protocol: number) {
    try {
      this.socket = new native.Socket(protocol);
    } catch (e) {
      throw fromNative('netlink.open', e);
    }
  }

  /**
   * Sends all requests batched (request objects, or `count` messages already laid out in `bytes`);
   * one outcome per request, in order. Throws only if the socket fails.
   */
  batch(schema: string, requests: NlRequest[] | EncodedRequests, label: (i: number) => OpLabel, limits?: BatchLimits): Promise<OpOutcome[]> {
    const count = Array.isArray(requests) ? requests.length : requests.count;
    if (count === 0) return Promise.resolve([]);
    return this.queue.run(async () => {
      let results;
      try {
        results = await this.socket.batch(schema, Array.isArray(requests) ? requests : [requests.bytes], limits);
      } catch (e) {
        const l = label(0);
        throw fromNative(count === 1 ? l.op : `${schema}.batch`, e, count === 1 ? l.object : undefined);
      }
      return results.map((r, i): OpOutcome => {
        if (r.errno === 0) return r.replies ? { ok: true, replies: r.replies } : DONE;
        const l = label(i);
        const init = { op: l.op, code: r.code ?? native.errnoName(r.errno), errno: r.errno } as ConstructorParameters<typeof NetlinkError>[0];
        if (r.extAck) init.extAck = r.extAck;
        if (l.object) init.object = l.object;
        const error = new NetlinkError(init);
        return r.echo ? { ok: false, error, echo: r.echo } : { ok: false, error };
      });
    });
  }

  /** Sends one request and returns its reply messages; throws a NetlinkError on failure. */
  async request(schema: string, req: NlRequest, op: string, object?: string): Promise<readonly NlMessage[]> {
    const [outcome] = await this.batch(schema, [req], () => (object ? { op, object } : { op }));
    if (!outcome) throw new NetlinkError({ op, code: 'EIO', errno: 5 });
    if (!outcome.ok) throw outcome.error;
    return outcome.replies;
  }

  /** Runs a dump request; throws a NetlinkError on failure. */
  dump(schema: string, req: NlRequest, op: string, object?: string, options?: DumpOptions): Promise<NlMessage[]> {
    return this.read(op, object, () => this.socket.dump(schema, req, options));
  }

  /** dump(), its replies decoded off the JS thread into one table (large dumps: see DumpTable). */
  dumpTable(schema: string, req: NlRequest, op: string, object?: string, options?: DumpOptions): Promise<DumpTable> {
    return this.read(op, object, () => this.socket.dump(schema, req, { ...options, table: true }));
  }

  /**
   * Runs several dumps in one call (one trip to the addon's thread), their replies as one table:
   * dump k's rows are starts[k] .. starts[k + 1] - 1. Throws on the first failure.
   */
  dumpManyTable(schema: string, reqs: NlRequest[], op: string, options?: DumpOptions): Promise<DumpTable> {
    if (reqs.length === 0) return Promise.resolve({ rows: 0, starts: Uint32Array.of(0), columns: {} });
    return this.read(op, undefined, () => this.socket.dumpMany(schema, reqs, options));
  }

  private read<T>(op: string, object: string | undefined, call: () => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      try {
        return await call();
      } catch (e) {
        throw fromNative(op, e, object);
      }
    });
  }

  /** Closes the socket once queued calls have finished. */
  close(): void {
    void this.queue.run(async () => this.socket.close());
  }
}

/** A generic netlink family as the controller reports it. */
export interface GenlFamily {
  id: number;
  version: number;
  maxAttr: number;
}

/** Resolves a generic netlink family by name; null when the kernel has no such family. */
export async function resolveGenlFamily(conn: NetlinkConnection, name: string): Promise<GenlFamily | null> {
  const genl = constantsOf('genl');
  try {
    const replies = await conn.request(
      'genl.ctrl',
      { type: genl.GENL_ID_CTRL!, header: { cmd: genl.CTRL_CMD_GETFAMILY!, version: 1 }, attrs: { familyName: name } },
      'genl.getFamily',
      name,
    );
    const attrs = replies[0]?.attrs as { familyId?: number; version?: number; maxAttr?: number } | undefined;
    if (!attrs?.familyId) throw new NetlinkError({ op: 'genl.getFamily', code: 'EBADMSG', errno: 74, object: name });
    return { id: attrs.familyId, version: attrs.version ?? 0, maxAttr: attrs.maxAttr ?? 0 };
  } catch (e) {
    if (e instanceof NetlinkError && e.code === 'ENOENT') return null;
    throw e;
  }
}
