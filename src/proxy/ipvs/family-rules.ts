// The IPVS mode's iptables rules per family, built from the desired state: while a family's
// inputs stay the same its last spec is handed out again, the same object (the keeper hashes
// each spec once).
import type { Iptables } from '../../kernel/iptables.js';
import type { DesiredIndex } from './desired-index.js';
import type { FamilyRules } from './iptables-keeper.js';
import { SET, setName } from './ipsets.js';
import { ipvsModeRules, lbNoNodeAccess } from './rules.js';
import type { DesiredContext } from './types.js';

/** Builds FamilyRules for the proxier; see the file comment. */
export class FamilyRulesBuilder {
  /** Per family, the rules last built and what they were built from. */
  private readonly last = new Map<string, { inputs: string; spec: FamilyRules['spec'] }>();

  constructor(private readonly index: DesiredIndex) {}

  /**
   * kube-proxy's IPVS-mode chains, per family (no ip6tables work on a node that never had IPv6
   * services, like kube-proxy's per-family proxiers; `kept(family)`: rules of that family were
   * restored before). The rules depend on the configuration (all ipvsModeRules reads of the
   * context), the sets that have entries and the load-balancer entries the node may not reach.
   */
  build(drivers: { ipv4: Iptables; ipv6: Iptables | null }, context: () => DesiredContext, kept: (family: 'ipv6') => boolean): FamilyRules[] {
    const { index } = this;
    const nonEmpty = new Set(index.allSets().filter((s) => index.ipsetEntries(s).size > 0));
    const hasIpv6 = index.counts().ipv6VirtualServers > 0;
    const out: FamilyRules[] = [];
    for (const [family, ipt] of Object.entries(drivers) as Array<['ipv4' | 'ipv6', Iptables | null]>) {
      if (!ipt || (family === 'ipv6' && !hasIpv6 && !kept('ipv6'))) continue;
      const entries = (base: (typeof SET)[keyof typeof SET]) => index.ipsetEntries(setName(base, family)).keys();
      const noNodeAccess = lbNoNodeAccess(entries(SET.LOAD_BALANCER_FW), entries(SET.LOAD_BALANCER_SOURCE_IP));
      const inputs = `${[...nonEmpty].sort().join()} ${noNodeAccess.join()} ${index.redirectVersion}`;
      let last = this.last.get(family);
      if (last?.inputs !== inputs) {
        const spec = ipvsModeRules(context(), family, nonEmpty, noNodeAccess, index.redirects(family));
        this.last.set(family, (last = { inputs, spec }));
      }
      out.push({ family, ipt, spec: last.spec });
    }
    return out;
  }
}
