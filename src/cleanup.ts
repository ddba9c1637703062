// `kube-ipvs-proxy cleanup` (and --cleanup): remove everything this proxy owns from the node.
import type { Config } from './config.js';
import { NetlinkIpsetClient } from './kernel/ipset/client.js';
import { NetlinkIpvsClient } from './kernel/ipvs/client.js';
import { Iptables } from './kernel/iptables.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient } from './kernel/link.js';
import type { Logger } from './log.js';
import { inCidr } from './model/ip.js';
import { OWNED_SET_PREFIX } from './inspect.js';
import { clearStateDir, STATE_DIR } from './state-dir.js';
import { dropBridges } from './proxy/ipvs/binding.js';

/** One step of the cleanup and what it came to. */
interface Step {
  what: string;
  run: () => Promise<string>;
}

/**
 * Removes IPVS virtual servers (except those within --ipvs-exclude-cidrs), this proxy's
 * iptables chains and the jumps to them (IPv4 and IPv6), its ipsets (after the rules that
 * reference them), the dummy link, and what the daemon left for the next one in its state
 * directory (resume and handoff records, iptables hashes: they describe what was just removed).
 * Every step runs even when an earlier one fails.
 */
export async function runCleanup(config: Config, logger: Logger): Promise<number> {
  const steps: Step[] = [
    {
      what: 'ipvs',
      run: async () => {
        const a = await NetlinkIpvsClient.open();
        if (!a.available) return `skipped: ${a.reason}`;
        try {
          const excluded = (addr: string | null) => addr !== null && config.ipvs.excludeCIDRs.some((c) => inCidr(addr, c));
          const doomed = (await a.client.listServices()).filter((s) => !excluded(s.address));
          const results = await a.client.apply(doomed.map((service) => ({ kind: 'deleteService' as const, service })));
          const failed = results.flatMap((r) => (r.ok ? [] : [r.error.message]));
          if (failed.length) throw new Error(failed.join('; '));
          return `deleted ${doomed.length} virtual servers`;
        } finally {
          a.client.close();
        }
      },
    },
    ...(['ipv4', 'ipv6'] as const).map((family) => ({
      what: `iptables ${family}`,
      run: async () => {
        const plans = await (await Iptables.create({ family })).cleanup(['nat', 'filter', 'mangle']);
        return `removed ${plans.reduce((n, p) => n + p.deletedChains.length, 0)} chains`;
      },
    })),
    {
      what: 'ipsets',
      run: async () => {
        const client = await NetlinkIpsetClient.open();
        try {
          const owned = (await client.listNames()).filter((n) => n.startsWith(OWNED_SET_PREFIX));
          for (const name of owned) await client.destroy(name, { exist: true });
          return `destroyed ${owned.length} sets`;
        } finally {
          client.close();
        }
      },
    },
    {
      what: `link ${DEFAULT_DUMMY_LINK}`,
      run: async () => {
        const client = NetlinkLinkClient.open();
        try {
          // A conversion stopped half-way may have left local routes of ours through lo (binding.ts).
          const bridges = (await dropBridges(client)).length === 0 ? '' : ' (some local routes through lo could not be deleted)';
          return `${(await client.deleteLink(DEFAULT_DUMMY_LINK, { kind: 'dummy' })) ? 'deleted' : 'absent'}${bridges}`;
        } finally {
          client.close();
        }
      },
    },
    { what: `state ${STATE_DIR}`, run: async () => `removed ${clearStateDir(STATE_DIR)} files` },
  ];
  let failed = 0;
  for (const step of steps) {
    try {
      logger.info({ step: step.what, result: await step.run() }, 'cleanup');
    } catch (e) {
      failed++;
      logger.error({ step: step.what, err: e instanceof Error ? e.message : String(e) }, 'cleanup step failed');
    }
  }
  return failed ? 1 : 0;
}
