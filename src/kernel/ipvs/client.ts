// The IPVS client: batched ops and dumps over generic netlink.
import { constantsOf, type NlRequest } from '../../native/binding.js';
import { checkWith as check, NetlinkError, ValidationError } from '../errors.js';
import { ERRORS_ONLY, NetlinkConnection, OK, resolveGenlFamily, type GenlFamily } from '../netlink.js';
import { dumpRows } from '../table.js';
import { destinationReader, serviceReader, serviceKeyAttrs } from './codec.js';
import {
  destinationId,
  destinationKeySchema,
  destinationSchema,
  isPlainDestination,
  isPlainDestinationKey,
  isPlainServiceKey,
  isPlainVirtualService,
  serviceId,
  serviceKeySchema,
  virtualServiceSchema,
  type Destination,
  type DestinationKey,
  type DestinationStatus,
  type IpvsInfo,
  type IpvsTimeouts,
  type ReadOptions,
  type ServiceKey,
  type ServiceStatus,
  type VirtualService,
} from './types.js';
import { IpvsWire } from './wire.js';

const C = constantsOf('ipvs');

/** What the decoder skips: both counter nests, or just the 32-bit one when counters are wanted. */
const omitFor = (o?: ReadOptions) => ({ omit: o?.stats ? ['stats'] : ['stats', 'stats64'] });

/** One change to the kernel's IPVS table. */
export type IpvsOp =
  | { kind: 'addService'; service: VirtualService }
  | { kind: 'updateService'; service: VirtualService }
  | { kind: 'deleteService'; service: ServiceKey }
  | { kind: 'addDestination'; service: ServiceKey; destination: Destination }
  | { kind: 'updateDestination'; service: ServiceKey; destination: Destination }
  | { kind: 'deleteDestination'; service: ServiceKey; destination: DestinationKey };

/** What one op came to: ok, or the kernel's (or the validator's) error naming the object. */
export type IpvsResult = { ok: true } | { ok: false; error: NetlinkError | ValidationError };

/** A service with its real servers. */
export interface ServiceWithDestinations extends ServiceStatus {
  destinations: DestinationStatus[];
}

/** Everything the proxy needs from IPVS; implemented over netlink and by the test fake. */
export interface IpvsClient {
  info(): Promise<IpvsInfo>;
  /** Applies ops in order, batched; one result per op. Invalid ops fail alone and are not sent. */
  apply(ops: readonly IpvsOp[]): Promise<IpvsResult[]>;
  listServices(options?: ReadOptions): Promise<ServiceStatus[]>;
  /**
   * The same read, each service built only when the iteration reaches it: a caller that keeps
   * few of them (the periodic verification, at 10,000) leaves little for the garbage collector.
   */
  readServices(options?: ReadOptions): Promise<Iterable<ServiceStatus>>;
  listDestinations(service: ServiceKey, options?: ReadOptions): Promise<DestinationStatus[]>;
  /** The destinations of several services, pipelined (one dump each, empty for a missing service). */
  listDestinationsMany(services: readonly ServiceKey[], options?: ReadOptions): Promise<DestinationStatus[][]>;
  /** Every service with its destinations (1 + N dumps, in one trip to the addon's thread). */
  dumpAll(options?: ReadOptions): Promise<ServiceWithDestinations[]>;
  flush(): Promise<void>;
  getTimeouts(): Promise<IpvsTimeouts>;
  setTimeouts(t: IpvsTimeouts): Promise<void>;
  close(): void;
}

/** Whether IPVS is usable on this kernel; when not, why (drives the iptables fallback). */
export type IpvsAvailability = { available: true; client: IpvsClient } | { available: false; reason: string };

/** Ops sent on the JS thread at most (see inlineBatch). */
export const INLINE_MAX_OPS = 32;
const INLINE = { ...ERRORS_ONLY, inline: true } as const;

/**
 * True when a batch is sent on the JS thread (BatchLimits.inline): a few real-server ops, which the
 * kernel answers in tens of microseconds, while the trip to libuv's thread and back took
 * milliseconds in UML (an endpoint change's whole write). Service ops may load a scheduler module
 * (modprobe, inside the call), and long batches would hold the event loop: those go to the thread.
 */
export function inlineBatch(ops: readonly IpvsOp[]): boolean {
  if (ops.length > INLINE_MAX_OPS) return false;
  return ops.every((op) => op.kind === 'addDestination' || op.kind === 'updateDestination' || op.kind === 'deleteDestination');
}

const OP_CMD: Record<IpvsOp['kind'], number> = {
  addService: C.IPVS_CMD_NEW_SERVICE!,
  updateService: C.IPVS_CMD_SET_SERVICE!,
  deleteService: C.IPVS_CMD_DEL_SERVICE!,
  addDestination: C.IPVS_CMD_NEW_DEST!,
  updateDestination: C.IPVS_CMD_SET_DEST!,
  deleteDestination: C.IPVS_CMD_DEL_DEST!,
};

/** `ipvs.<kind>`, the op's name in errors and validation messages (not a string built per op). */
const OP_NAME = Object.fromEntries(Object.keys(OP_CMD).map((k) => [k, `ipvs.${k}`])) as Record<IpvsOp['kind'], string>;

/** serviceKeySchema's check; zod only for a key isPlainServiceKey does not pass. */
function checkServiceKey(service: unknown, op: string): void {
  if (!isPlainServiceKey(service)) check(serviceKeySchema, service, op, 'service');
}

/**
 * Validates the ops of one batch and lays them out as messages (wire.ts). A service object shared
 * by many ops (a service and its destinations) is validated once (the wire knows it once a message
 * keyed by it is written): a batch of 11,000 ops would otherwise spend most of its time
 * re-checking the same 1,000 services.
 */
class OpEncoder {
  readonly wire: IpvsWire;
  /** `ops`: how many the batch has (a dest op is ~100 bytes: a one-change batch fits Node's buffer pool). */
  constructor(familyId: number, ops: number) {
    this.wire = new IpvsWire(familyId, Math.max(256, ops * 100));
  }

  /** Validates an op (throws ValidationError naming the field, and writes nothing) and appends its message. */
  encode(op: IpvsOp): void {
    const name = OP_NAME[op.kind];
    const cmd = OP_CMD[op.kind];
    if (op.kind === 'addService' || op.kind === 'updateService') {
      if (!isPlainVirtualService(op.service)) check(virtualServiceSchema, op.service, name, 'service');
      this.wire.service(cmd, op.service);
      return;
    }
    if (!this.wire.knows(op.service)) checkServiceKey(op.service, name);
    if (op.kind === 'deleteService') {
      this.wire.serviceKeyed(cmd, op.service);
    } else if (op.kind === 'deleteDestination') {
      if (!isPlainDestinationKey(op.destination)) check(destinationKeySchema, op.destination, name, 'destination');
      this.wire.serviceKeyed(cmd, op.service, { d: op.destination, full: false });
    } else {
      if (!isPlainDestination(op.destination)) check(destinationSchema, op.destination, name, 'destination');
      this.wire.serviceKeyed(cmd, op.service, { d: op.destination, full: true });
    }
  }
}

/** Names the object of an op, e.g. `tcp/10.96.0.10:80` or `tcp/10.96.0.10:80 -> 10.244.1.2:8080`. */
export function opObject(op: IpvsOp): string {
  const svc = serviceId(op.service);
  return 'destination' in op ? `${svc} -> ${destinationId(op.destination)}` : svc;
}

/** Turns the kernel's ENOENT on NEW/SET_SERVICE into what it means: no such scheduler module. */
function explain(op: IpvsOp, e: NetlinkError): NetlinkError {
  if ((op.kind === 'addService' || op.kind === 'updateService') && e.code === 'ENOENT') {
    return new NetlinkError({
      op: e.op,
      code: e.code,
      errno: e.errno,
      object: e.object ?? opObject(op),
      message: `${e.op} ${opObject(op)}: scheduler "${op.service.scheduler}" is not available in the kernel (ENOENT)`,
    });
  }
  return e;
}

/** IpvsClient over the addon's generic netlink socket. */
export class NetlinkIpvsClient implements IpvsClient {
  private constructor(
    private readonly conn: NetlinkConnection,
    private readonly family: GenlFamily,
  ) {}

  /**
   * Opens a socket and resolves the IPVS family; unavailable (with the reason) when the kernel has none.
   * `familyName` is for tests: a name no kernel has gets the kernel's real "no such family" answer.
   */
  static async open(familyName = C.IPVS_GENL_NAME as unknown as string): Promise<IpvsAvailability> {
    const conn = new NetlinkConnection(constantsOf('netlink').NETLINK_GENERIC!);
    try {
      const family = await resolveGenlFamily(conn, familyName);
      if (!family) {
        conn.close();
        return { available: false, reason: 'the kernel has no IPVS generic netlink family (module ip_vs not loaded or not built)' };
      }
      return { available: true, client: new NetlinkIpvsClient(conn, family) };
    } catch (e) {
      conn.close();
      throw e;
    }
  }

  private req(cmd: number, attrs?: Record<string, unknown>): NlRequest {
    return { type: this.family.id, header: { cmd, version: C.IPVS_GENL_VERSION! }, ...(attrs ? { attrs } : {}) };
  }

  async info(): Promise<IpvsInfo> {
    const [reply] = await this.conn.request('ipvs.info', this.req(C.IPVS_CMD_GET_INFO!), 'ipvs.getInfo');
    const a = (reply?.attrs ?? {}) as { version?: number; connTabSize?: number };
    const v = a.version ?? 0;
    return { version: `${(v >> 16) & 0xff}.${(v >> 8) & 0xff}.${v & 0xff}`, connTableSize: a.connTabSize ?? 0 };
  }

  async apply(ops: readonly IpvsOp[]): Promise<IpvsResult[]> {
    const results: IpvsResult[] = new Array(ops.length);
    const sent: number[] = [];
    const encoder = new OpEncoder(this.family.id, ops.length);
    ops.forEach((op, i) => {
      try {
        encoder.encode(op);
        sent.push(i);
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        results[i] = { ok: false, error: e };
      }
    });
    const outcomes = await this.conn.batch('ipvs', { bytes: encoder.wire.bytes(), count: encoder.wire.count }, (j) => {
      const op = ops[sent[j]!]!;
      return { op: OP_NAME[op.kind], object: opObject(op) };
    }, inlineBatch(ops) ? INLINE : ERRORS_ONLY);
    outcomes.forEach((o, j) => {
      const i = sent[j]!;
      results[i] = o.ok ? OK : { ok: false, error: explain(ops[i]!, o.error) };
    });
    return results;
  }

  async listServices(options?: ReadOptions): Promise<ServiceStatus[]> {
    return [...(await this.readServices(options))];
  }

  async readServices(options?: ReadOptions): Promise<Iterable<ServiceStatus>> {
    const t = await this.conn.dumpTable('ipvs', this.req(C.IPVS_CMD_GET_SERVICE!), 'ipvs.listServices', undefined, omitFor(options));
    const service = serviceReader(t);
    return {
      *[Symbol.iterator]() {
        for (let i = 0; i < t.rows; i++) yield service(i);
      },
    };
  }

  async listDestinations(service: ServiceKey, options?: ReadOptions): Promise<DestinationStatus[]> {
    checkServiceKey(service, 'ipvs.listDestinations');
    const t = await this.conn.dumpTable(
      'ipvs',
      this.req(C.IPVS_CMD_GET_DEST!, { service: serviceKeyAttrs(service) }),
      'ipvs.listDestinations',
      serviceId(service),
      omitFor(options),
    );
    const destination = destinationReader(t);
    return Array.from({ length: t.rows }, (_, i) => destination(i, service.family));
  }

  async listDestinationsMany(services: readonly ServiceKey[], options?: ReadOptions): Promise<DestinationStatus[][]> {
    for (const s of services) checkServiceKey(s, 'ipvs.listDestinations');
    return this.destinationsOf(services, options);
  }

  async dumpAll(options?: ReadOptions): Promise<ServiceWithDestinations[]> {
    const services = await this.listServices(options);
    const dests = await this.destinationsOf(services, options);
    return services.map((s, i) => ({ ...s, destinations: dests[i]! }));
  }

  /** The destinations of each service: one dump each, in one trip, decoded into one table off the JS thread. */
  private async destinationsOf(services: readonly ServiceKey[], options?: ReadOptions): Promise<DestinationStatus[][]> {
    const t = await this.conn.dumpManyTable(
      'ipvs',
      services.map((s) => this.req(C.IPVS_CMD_GET_DEST!, { service: serviceKeyAttrs(s) })),
      'ipvs.listDestinations',
      omitFor(options),
    );
    const destination = destinationReader(t);
    return services.map((s, k) => dumpRows(t, k).map((r) => destination(r, s.family)));
  }

  async flush(): Promise<void> {
    await this.conn.request('ipvs', this.req(C.IPVS_CMD_FLUSH!), 'ipvs.flush');
  }

  async getTimeouts(): Promise<IpvsTimeouts> {
    const [reply] = await this.conn.request('ipvs', this.req(C.IPVS_CMD_GET_CONFIG!), 'ipvs.getTimeouts');
    const a = (reply?.attrs ?? {}) as { timeoutTcp?: number; timeoutTcpFin?: number; timeoutUdp?: number };
    return { tcp: a.timeoutTcp ?? 0, tcpFin: a.timeoutTcpFin ?? 0, udp: a.timeoutUdp ?? 0 };
  }

  async setTimeouts(t: IpvsTimeouts): Promise<void> {
    for (const [k, v] of Object.entries(t)) {
      if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw new ValidationError('ipvs.setTimeouts', k, 'expected seconds >= 0');
    }
    await this.conn.request(
      'ipvs',
      this.req(C.IPVS_CMD_SET_CONFIG!, { timeoutTcp: t.tcp, timeoutTcpFin: t.tcpFin, timeoutUdp: t.udp }),
      'ipvs.setTimeouts',
    );
  }

  close(): void {
    this.conn.close();
  }
}

/** Throws the first failure among results (for callers that want all-or-error semantics). */
export function throwFirstFailure(results: readonly IpvsResult[]): void {
  for (const r of results) if (!r.ok) throw r.error;
}
