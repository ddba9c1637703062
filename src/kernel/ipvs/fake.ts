// An in-memory IpvsClient that answers as the kernel does (ip_vs_ctl.c), held to it by the case
// table both run (test/kernel/lib/cases/ipvs-cases.ts), with error injection, call/op counters
// and settable connection counts, for unit tests of plan/apply/graceful termination.
import { constants as os } from 'node:os';

import { canonicalIp, familyOf, ipToBytes } from '../../model/ip.js';
import { checkWith as check, NetlinkError, ValidationError } from '../errors.js';
import { opObject, type IpvsClient, type IpvsOp, type IpvsResult, type ServiceWithDestinations } from './client.js';
import { bitsToFlags, canonicalKey, flagsToBits } from './codec.js';
import {
  KNOWN_SCHEDULERS,
  destinationId,
  destinationKeySchema,
  destinationSchema,
  serviceId,
  serviceKeySchema,
  virtualServiceSchema,
  type DestinationKey,
  type DestinationStatus,
  type IpvsInfo,
  type IpvsStats,
  type IpvsTimeouts,
  type ReadOptions,
  type ServiceKey,
  type ServiceStatus,
  type VirtualService,
} from './types.js';

/** The IpvsClient methods the fake counts (and can fail whole). */
export type IpvsMethod = 'info' | 'apply' | 'listServices' | 'listDestinations' | 'dumpAll' | 'flush' | 'getTimeouts' | 'setTimeouts';

interface FakeService {
  service: VirtualService;
  bits: number;
  dests: Map<string, DestinationStatus>;
}

interface OpFault {
  remaining: number;
  code: string;
  match: (op: IpvsOp) => boolean;
}

const ZERO_STATS: IpvsStats = { conns: 0, inPkts: 0, outPkts: 0, inBytes: 0, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 };

function kernelError(op: IpvsOp, code: string, message?: string): NetlinkError {
  const errno = (os.errno as Record<string, number>)[code] ?? 0;
  return new NetlinkError({ op: `ipvs.${op.kind}`, code, errno, object: opObject(op), ...(message ? { message } : {}) });
}

/** Validates like NetlinkIpvsClient (same schemas, same `op: field: reason` message). */
function validate(op: IpvsOp): void {
  const name = `ipvs.${op.kind}`;
  if (op.kind === 'addService' || op.kind === 'updateService') return check(virtualServiceSchema, op.service, name, 'service');
  check(serviceKeySchema, op.service, name, 'service');
  if (op.kind === 'deleteDestination') check(destinationKeySchema, op.destination, name, 'destination');
  else if (op.kind !== 'deleteService') check(destinationSchema, op.destination, name, 'destination');
}

/**
 * True for a real-server address the kernel refuses (EINVAL): IPv4 0.0.0.0, 255.255.255.255 and
 * multicast; IPv6 ::, multicast, link-local and v4-mapped. NOTE: ip_vs_new_dest() in ip_vs_ctl.c
 * (inet_addr_type / ipv6_addr_type); the broadcast address of a local subnet is refused too,
 * which the fake, having no interfaces, does not know.
 */
function unroutable(address: string): boolean {
  const b = ipToBytes(address);
  if (b.length === 4) return b.every((x) => x === 0) || b.every((x) => x === 255) || (b[0]! & 0xf0) === 0xe0;
  const mapped = b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
  return b.every((x) => x === 0) || b[0] === 0xff || (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) || mapped;
}

const keyOf = (k: ServiceKey): string => serviceId(canonicalKey(k));
const destKeyOf = (d: DestinationKey): string => destinationId({ address: canonicalIp(d.address), port: d.port });

/**
 * IpvsClient over an in-memory table with the kernel's answers: EEXIST on a duplicate service
 * or destination, ESRCH for an op on a missing service (including adding a destination to it),
 * ENOENT for a missing destination and for an unknown scheduler or persistence engine, ERANGE
 * for a lower threshold above the upper one, EINVAL for an IPv6 netmask of 0, for a
 * destination of the other family that is not tunnelled and for a real-server address the
 * kernel cannot forward to (see unroutable). Flags read back as the kernel
 * reports them (named after the scheduler); addresses read back canonical.
 */
export class FakeIpvsClient implements IpvsClient {
  private readonly table = new Map<string, FakeService>();
  private readonly opFaults: OpFault[] = [];
  private readonly callFaults = new Map<IpvsMethod, Error>();
  private timeouts: IpvsTimeouts = { tcp: 900, tcpFin: 120, udp: 300 };
  /** Scheduler modules the fake kernel has. */
  readonly schedulers = new Set<string>(KNOWN_SCHEDULERS);
  /** Persistence engines the fake kernel has. */
  readonly persistenceEngines = new Set<string>(['sip']);
  /** Ops received by apply(), per kind (failed ones included). */
  readonly ops: Record<IpvsOp['kind'], number> = { addService: 0, updateService: 0, deleteService: 0, addDestination: 0, updateDestination: 0, deleteDestination: 0 };

  /** Every op received by apply(), in order (cleared by resetCounters). */
  readonly log: IpvsOp[] = [];

  /** Every call, in order (cleared by resetCounters). */
  readonly callLog: IpvsMethod[] = [];

  /** Calls per method (counted from callLog). */
  get calls(): Record<IpvsMethod, number> {
    const out: Record<IpvsMethod, number> = { info: 0, apply: 0, listServices: 0, listDestinations: 0, dumpAll: 0, flush: 0, getTimeouts: 0, setTimeouts: 0 };
    for (const m of this.callLog) out[m]++;
    return out;
  }

  /** Total ops received by apply(). */
  get opCount(): number {
    return Object.values(this.ops).reduce((a, b) => a + b, 0);
  }

  /** Reads of the table (dumps): listServices + listDestinations + dumpAll calls. */
  get dumpCount(): number {
    const c = this.calls;
    return c.listServices + c.listDestinations + c.dumpAll;
  }

  /** Zeroes the call and op counters and the op log. */
  resetCounters(): void {
    for (const k of Object.keys(this.ops) as Array<IpvsOp['kind']>) this.ops[k] = 0;
    this.log.length = 0;
    this.callLog.length = 0;
  }

  /** The next `count` ops matching `match` (default: any) fail with errno `code` and change nothing. */
  failOps(code: string, match: (op: IpvsOp) => boolean = () => true, count = 1): void {
    this.opFaults.push({ remaining: count, code, match });
  }

  /** The next call of `method` throws `error` (for apply: before any op is applied). */
  failCall(method: IpvsMethod, error: Error): void {
    this.callFaults.set(method, error);
  }

  /** Sets a destination's connection counters, as traffic would. Throws if there is no such destination. */
  setConnections(service: ServiceKey | string, destination: DestinationKey | string, active: number, inactive = 0, persist = 0): void {
    const svc = this.table.get(typeof service === 'string' ? service : keyOf(service));
    const d = svc?.dests.get(typeof destination === 'string' ? destination : destKeyOf(destination));
    if (!d) throw new Error(`fake ipvs: no destination ${String(typeof destination === 'string' ? destination : destKeyOf(destination))} in ${String(service)}`);
    d.activeConns = active;
    d.inactiveConns = inactive;
    d.persistConns = persist;
  }

  /** The table as `serviceId -> destinationId -> weight`, for compact assertions. */
  weights(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [id, s] of this.table) out[id] = Object.fromEntries([...s.dests].map(([d, v]) => [d, v.weight]));
    return out;
  }

  private enter(method: IpvsMethod): void {
    this.callLog.push(method);
    const fault = this.callFaults.get(method);
    if (fault) {
      this.callFaults.delete(method);
      throw fault;
    }
  }

  async info(): Promise<IpvsInfo> {
    this.enter('info');
    return { version: '1.2.1', connTableSize: 4096 };
  }

  async apply(ops: readonly IpvsOp[]): Promise<IpvsResult[]> {
    this.enter('apply');
    return ops.map((op) => {
      this.ops[op.kind]++;
      this.log.push(op);
      try {
        validate(op);
      } catch (e) {
        if (e instanceof ValidationError) return { ok: false, error: e };
        throw e;
      }
      const fault = this.opFaults.find((f) => f.remaining > 0 && f.match(op));
      if (fault) {
        fault.remaining--;
        if (fault.remaining === 0) this.opFaults.splice(this.opFaults.indexOf(fault), 1);
        return { ok: false, error: kernelError(op, fault.code) };
      }
      const error = this.applyOne(op);
      return error ? { ok: false, error } : { ok: true };
    });
  }

  /** NOTE: the checks follow ip_vs_genl_set_cmd(), ip_vs_add/edit_service() and ip_vs_add/edit/del_dest() in ip_vs_ctl.c. */
  private applyOne(op: IpvsOp): NetlinkError | null {
    const id = keyOf(op.service);
    const svc = this.table.get(id);
    if (op.kind === 'addService' || op.kind === 'updateService') {
      if (op.kind === 'addService' && svc) return kernelError(op, 'EEXIST');
      if (op.kind === 'updateService' && !svc) return kernelError(op, 'ESRCH');
      const s = op.service;
      if (!this.schedulers.has(s.scheduler)) {
        return kernelError(op, 'ENOENT', `ipvs.${op.kind} ${opObject(op)}: scheduler "${s.scheduler}" is not available in the kernel (ENOENT)`);
      }
      if (s.pe && !this.persistenceEngines.has(s.pe)) return kernelError(op, 'ENOENT');
      if (s.family === 'ipv6' && s.netmask < 1) return kernelError(op, 'EINVAL');
      const bits = flagsToBits(s.flags);
      const service: VirtualService = { ...canonicalKey(s), scheduler: s.scheduler, flags: bitsToFlags(bits, s.scheduler), timeout: s.timeout, netmask: s.netmask, pe: s.pe || null };
      if (svc) Object.assign(svc, { service, bits });
      else this.table.set(id, { service, bits, dests: new Map() });
      return null;
    }
    if (!svc) return kernelError(op, 'ESRCH');
    if (op.kind === 'deleteService') {
      this.table.delete(id);
      return null;
    }
    const did = destKeyOf(op.destination);
    const dest = svc.dests.get(did);
    if (op.kind === 'deleteDestination') {
      if (!dest) return kernelError(op, 'ENOENT');
      svc.dests.delete(did);
      return null;
    }
    const d = op.destination;
    if (familyOf(d.address) !== svc.service.family && d.forward !== 'tunnel') return kernelError(op, 'EINVAL');
    if (d.lowerThreshold > d.upperThreshold) return kernelError(op, 'ERANGE');
    if (op.kind === 'addDestination' && dest) return kernelError(op, 'EEXIST');
    if (op.kind === 'addDestination' && unroutable(d.address)) return kernelError(op, 'EINVAL');
    if (op.kind === 'updateDestination' && !dest) return kernelError(op, 'ENOENT');
    const next: DestinationStatus = {
      address: canonicalIp(d.address),
      port: d.port,
      forward: d.forward,
      weight: d.weight,
      upperThreshold: d.upperThreshold,
      lowerThreshold: d.lowerThreshold,
      activeConns: dest?.activeConns ?? 0,
      inactiveConns: dest?.inactiveConns ?? 0,
      persistConns: dest?.persistConns ?? 0,
    };
    svc.dests.set(did, next);
    return null;
  }

  private serviceStatus(s: FakeService, options?: ReadOptions): ServiceStatus {
    return { ...s.service, flags: [...s.service.flags], ...(options?.stats ? { stats: { ...ZERO_STATS } } : {}) };
  }

  /** Newest first, as the kernel lists them (a new dest goes to the head of svc->destinations). */
  private destinations(s: FakeService, options?: ReadOptions): DestinationStatus[] {
    return [...s.dests.values()].reverse().map((d) => ({ ...d, ...(options?.stats ? { stats: { ...ZERO_STATS } } : {}) }));
  }

  async listServices(options?: ReadOptions): Promise<ServiceStatus[]> {
    this.enter('listServices');
    return [...this.table.values()].map((s) => this.serviceStatus(s, options));
  }

  readServices(options?: ReadOptions): Promise<Iterable<ServiceStatus>> {
    return this.listServices(options);
  }

  /** Like the kernel, a missing service is an empty dump, not an error. */
  async listDestinations(service: ServiceKey, options?: ReadOptions): Promise<DestinationStatus[]> {
    this.enter('listDestinations');
    check(serviceKeySchema, service, 'ipvs.listDestinations', 'service');
    const s = this.table.get(keyOf(service));
    return s ? this.destinations(s, options) : [];
  }

  async listDestinationsMany(services: readonly ServiceKey[], options?: ReadOptions): Promise<DestinationStatus[][]> {
    const out: DestinationStatus[][] = [];
    for (const s of services) out.push(await this.listDestinations(s, options));
    return out;
  }

  async dumpAll(options?: ReadOptions): Promise<ServiceWithDestinations[]> {
    this.enter('dumpAll');
    return [...this.table.values()].map((s) => ({ ...this.serviceStatus(s, options), destinations: this.destinations(s, options) }));
  }

  async flush(): Promise<void> {
    this.enter('flush');
    this.table.clear();
  }

  async getTimeouts(): Promise<IpvsTimeouts> {
    this.enter('getTimeouts');
    return { ...this.timeouts };
  }

  async setTimeouts(t: IpvsTimeouts): Promise<void> {
    this.enter('setTimeouts');
    for (const [k, v] of Object.entries(t)) {
      if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw new ValidationError('ipvs.setTimeouts', k, 'expected seconds >= 0');
    }
    // 0 leaves a timeout unchanged, as IPVS_CMD_SET_CONFIG does.
    this.timeouts = { tcp: t.tcp || this.timeouts.tcp, tcpFin: t.tcpFin || this.timeouts.tcpFin, udp: t.udp || this.timeouts.udp };
  }

  close(): void {}
}
