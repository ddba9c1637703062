// The IPVS part of apply (apply.ts): the ops sent in batches, in the plan's order; an add that
// finds its object there becomes an update; acknowledged ops folded into the observed state, and
// what a failure proves observed lacks dropped from it (drift).
import { NetlinkError, isExist, isNotFound } from '../../kernel/errors.js';
import { opObject, type IpvsClient, type IpvsOp, type IpvsResult } from '../../kernel/ipvs/client.js';
import { bitsToFlags, flagsToBits } from '../../kernel/ipvs/codec.js';
import { destinationId, serviceId, type Destination, type ServiceKey, type VirtualService } from '../../kernel/ipvs/types.js';
import { DestinationTable } from './destination-table.js';
import type { ApplyCounts, ApplyResult } from './apply.js';
import type { DesiredDelta } from './desired-index.js';
import type { ErrorClass } from './errors.js';
import type { ObservedState } from './types.js';

/** Where the IPVS ops' outcome is recorded (the apply's shared record). */
export interface ApplyLog {
  readonly counts: ApplyCounts;
  readonly retryScope: DesiredDelta;
  readonly drift: ApplyResult['drift'];
  retry: boolean;
  /** Records a failure; returns its class. */
  fail(object: string, error: Error, op: string): ErrorClass;
}

/**
 * What a failed op proves the kernel lacks of what observed holds (null: nothing): the service for
 * ESRCH on any op but a service's add (the fold first takes the ESRCH of a real server whose
 * service's add failed in the same plan as that failure's consequence), the real server for
 * ENOENT on its update.
 */
function missing(op: IpvsOp, e: Error): 'service' | 'destination' | null {
  if (!(e instanceof NetlinkError)) return null;
  if (e.code === 'ESRCH' && op.kind !== 'addService') return 'service';
  if (e.code === 'ENOENT' && op.kind === 'updateDestination') return 'destination';
  return null;
}

type ObservedDest = Destination & { activeConns?: number; inactiveConns?: number };

/** A service as the kernel reports it back: flags named after its scheduler, pe null when none. */
function asReported(s: VirtualService): VirtualService {
  const { family, protocol, address, port, fwmark, scheduler, timeout, netmask } = s;
  const flags = bitsToFlags(flagsToBits(s.flags), scheduler);
  // The desired object itself when the kernel reports it as it is (most): one object for both states.
  if (s.pe === null && flags.length === s.flags.length && flags.every((f, i) => f === s.flags[i])) return s;
  return { family, protocol, address, port, fwmark, scheduler, flags, timeout, netmask, pe: s.pe || null };
}

// Literals, not `{ ...d, activeConns }`: V8 gives every object built by a spread plus new
// properties a map of its own, per real server kept.
function observedDest(d: Destination, activeConns: number, inactiveConns: number): ObservedDest {
  return { address: d.address, port: d.port, forward: d.forward, weight: d.weight, upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold, activeConns, inactiveConns };
}

/** Applies a plan's IPVS ops; see the file comment. */
export class IpvsApplier {
  constructor(
    private readonly log: ApplyLog,
    private readonly ipvsClient: IpvsClient,
    private readonly observed: ObservedState,
    private readonly batchSize: number,
  ) {}

  /** The service of the last op marked and its id: a plan's ops come grouped by service. */
  private markedService: ServiceKey | null = null;
  private markedId = '';

  /** Folds an acknowledged op into the observed state. */
  private mark(op: IpvsOp): void {
    const vs = this.observed.virtualServers;
    if (op.service !== this.markedService) [this.markedService, this.markedId] = [op.service, serviceId(op.service)];
    const id = this.markedId;
    const o = vs.get(id);
    switch (op.kind) {
      case 'addService':
      case 'updateService':
        if (o) o.service = asReported(op.service);
        else vs.set(id, { service: asReported(op.service), destinations: new DestinationTable() });
        return;
      case 'deleteService':
        vs.delete(id);
        return;
      case 'deleteDestination':
        o?.destinations.delete(destinationId(op.destination));
        return;
      default: {
        const did = destinationId(op.destination);
        const prev = o?.destinations.get(did);
        // Without connection counts to carry, the acknowledged object itself is kept: it is the
        // desired state's own (one object per real server, not two; neither side mutates it).
        const conns = (prev?.activeConns ?? 0) + (prev?.inactiveConns ?? 0) > 0;
        o?.destinations.set(did, conns ? observedDest(op.destination, prev!.activeConns ?? 0, prev!.inactiveConns ?? 0) : op.destination);
      }
    }
  }

  /**
   * Compares the op's virtual server again on the retry, after dropping from observed what the
   * error proves missing (missing()).
   */
  private repair(op: IpvsOp, e: Error): void {
    const id = serviceId(op.service);
    this.log.retryScope.virtualServers.add(id);
    const gone = missing(op, e);
    if (gone === 'service') this.observed.virtualServers.delete(id);
    else if (gone === 'destination' && op.kind === 'updateDestination') this.observed.virtualServers.get(id)?.destinations.delete(destinationId(op.destination));
  }

  /** A failed IPVS op: drift (observed repaired, retried, not an error) or an error (reported; repaired unless refused). */
  private failed(op: IpvsOp, e: Error): void {
    if (missing(op, e) !== null) {
      this.log.drift.push({ object: opObject(op), error: e });
      this.log.retry = true;
      this.repair(op, e);
    } else if (this.log.fail(opObject(op), e, `ipvs.${op.kind}`) !== 'refused') this.repair(op, e);
  }

  /**
   * Sends the IPVS ops in batches of `batchSize` (apply.ts's BATCH_SIZE), in order; returns, per op, whether its effect is
   * in place. A batch that fails as a whole stops the rest (their services are compared again on
   * the retry).
   */
  async apply(ops: readonly IpvsOp[]): Promise<boolean[]> {
    const done: boolean[] = new Array(ops.length).fill(false);
    const followUps: Array<{ i: number; op: IpvsOp }> = [];
    const failedAdds = new Set<string>();
    for (let from = 0; from < ops.length; from += this.batchSize) {
      const chunk = ops.slice(from, from + this.batchSize);
      const results = await this.batch(chunk);
      if (!results) {
        for (const op of ops.slice(from + this.batchSize)) this.log.retryScope.virtualServers.add(serviceId(op.service));
        break;
      }
      this.fold(chunk, results, from, done, followUps, failedAdds);
    }
    if (followUps.length === 0) return done;
    this.log.counts.followUps += followUps.length;
    const again = await this.batch(followUps.map((f) => f.op));
    if (!again) return done;
    const adopted: IpvsOp[] = [];
    again.forEach((r, j) => {
      const { i, op } = followUps[j]!;
      if (r.ok) {
        this.mark(op);
        done[i] = true;
        if (op.kind === 'updateService') adopted.push(op);
      } else this.failed(op, r.error);
    });
    await this.readBack(adopted);
    return done;
  }

  /** Folds the results of one batch (ops[0] is op number `base` of the plan). */
  private fold(ops: readonly IpvsOp[], results: IpvsResult[], base: number, done: boolean[], followUps: Array<{ i: number; op: IpvsOp }>, failedAdds: Set<string>): void {
    results.forEach((r, k) => {
      const op = ops[k]!;
      const i = base + k;
      if (r.ok || (op.kind.startsWith('delete') && isNotFound(r.error))) {
        this.mark(op);
        done[i] = true;
      } else if (op.kind === 'addService' && isExist(r.error)) {
        // Someone else made it: take it over with our parameters; its destinations are read back below.
        this.mark(op);
        followUps.push({ i, op: { kind: 'updateService', service: op.service } });
      } else if (op.kind === 'addDestination' && isExist(r.error)) {
        followUps.push({ i, op: { kind: 'updateDestination', service: op.service, destination: op.destination } });
      } else if (op.kind !== 'addService' && failedAdds.has(serviceId(op.service)) && r.error instanceof NetlinkError && r.error.code === 'ESRCH') {
        // A destination of a service whose add just failed: a consequence, reported through the service.
        this.repair(op, r.error);
      } else {
        if (op.kind === 'addService') failedAdds.add(serviceId(op.service));
        this.failed(op, r.error);
      }
    });
  }

  /** A service we added already existed: learn its real destinations (rare) and compare it again. */
  private async readBack(ops: readonly IpvsOp[]): Promise<void> {
    for (const op of ops) {
      const id = serviceId(op.service);
      this.log.retryScope.virtualServers.add(id);
      this.log.retry = true;
      let dests;
      try {
        dests = await this.ipvsClient.listDestinations(op.service);
      } catch (e) {
        this.log.fail(id, e as Error, 'ipvs.listDestinations');
        continue;
      }
      const o = this.observed.virtualServers.get(id);
      if (!o) continue;
      o.destinations = new DestinationTable(dests.map((d) => observedDest(d, d.activeConns, d.inactiveConns)));
    }
  }

  private async batch(ops: readonly IpvsOp[]): Promise<IpvsResult[] | null> {
    this.log.counts.ipvsCalls++;
    this.log.counts.ipvsOps += ops.length;
    try {
      return await this.ipvsClient.apply(ops);
    } catch (e) {
      this.log.fail('ipvs', e as Error, 'ipvs.apply');
      for (const op of ops) this.log.retryScope.virtualServers.add(serviceId(op.service));
      return null;
    }
  }
}
