// UDP has no connection end: conntrack entries keep sending a flow to a removed endpoint, and
// entries made while a service had no endpoint (never DNATed) keep it black-holed. This clears
// both after a sync, for the service ports that changed (what kube-proxy's
// conntrack.CleanStaleEntries is for), through the `conntrack` tool.
import { spawnExec } from '../kernel/exec.js';
import { familyOf } from '../model/ip.js';
import type { ProxyState } from '../model/service.js';

/** Runs `conntrack ARGS`; exit 1 (no matching entry) is not an error. */
export type ConntrackRunner = (args: string[]) => Promise<unknown>;

const defaultRunner: ConntrackRunner = (args) => spawnExec('conntrack', args, { timeoutMs: 30_000 }).catch(() => undefined);

/** Remembers each UDP service port's endpoints and clears the entries that went stale. */
export class UdpConntrack {
  private readonly endpoints = new Map<string, Set<string>>();

  constructor(private readonly run: ConntrackRunner = defaultRunner) {}

  /** After a sync: clears stale entries of the changed UDP port keys. */
  async clean(state: ProxyState, changed: ReadonlySet<string>): Promise<void> {
    for (const key of changed) {
      const svc = state.services.get(key);
      const before = this.endpoints.get(key);
      if (!svc || svc.protocol !== 'udp') {
        this.endpoints.delete(key);
        continue;
      }
      const now = new Set((state.endpoints.get(key) ?? []).filter((ep) => ep.ready || (ep.serving && ep.terminating)).map((ep) => ep.address));
      this.endpoints.set(key, now);
      const vips = [...svc.clusterIPs, ...svc.externalIPs, ...svc.loadBalancerIPs];
      const f = (ip: string) => (familyOf(ip) === 'ipv6' ? 'ipv6' : 'ipv4');
      // Never-DNATed entries (the service had no endpoint, or this process did not know): their
      // reply comes from the VIP itself. DNATed flows are left alone, so a restart breaks none.
      if ((before === undefined || before.size === 0) && now.size > 0) {
        for (const vip of vips) await this.run(['-D', '-f', f(vip), '-p', 'udp', '--orig-dst', vip, '--orig-port-dst', String(svc.port), '--reply-src', vip]);
      }
      for (const ep of before ?? []) {
        if (now.has(ep)) continue;
        for (const vip of vips) if (f(vip) === f(ep)) await this.run(['-D', '-f', f(ep), '-p', 'udp', '--orig-dst', vip, '--orig-port-dst', String(svc.port), '--dst-nat', ep]);
        if (svc.nodePort !== null) await this.run(['-D', '-f', f(ep), '-p', 'udp', '--orig-port-dst', String(svc.nodePort), '--dst-nat', ep]);
      }
    }
  }
}
