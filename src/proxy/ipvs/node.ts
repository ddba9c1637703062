// The node-level objects the IPVS proxier keeps: the IPVS timeouts, the sysctls, the dummy link,
// and the node addresses NodePorts listen on.
import type { Config } from '../../config.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import type { LinkClient } from '../../kernel/link.js';
import { cidrsOfFamily, familyOf, inCidr } from '../../model/ip.js';
import type { ObjectError } from '../../model/service.js';
import { convertStrays, dropBridges } from './binding.js';
import { applySysctls, conntrackSysctls, ipvsSysctls } from './sysctl.js';
import type { NodeAddresses } from './verify.js';

/**
 * The local addresses NodePorts listen on: those in the --nodeport-addresses CIDRs, the Node
 * object's (`primary`), or all. As kube-proxy's per-family NodePortAddresses, an IP family none of
 * the CIDRs is of listens on all of its addresses.
 */
export function nodePortAddresses(local: string[], wanted: Config['nodePortAddresses'], nodeIPs: () => readonly string[]): string[] {
  if (wanted.length === 0) return local;
  if (wanted[0] === 'primary') {
    const ips = nodeIPs();
    return local.filter((a) => ips.includes(a));
  }
  return local.filter((a) => nodePortsOnAll(wanted, familyOf(a)) || wanted.some((c) => inCidr(a, c)));
}

/** Whether an IP family serves node ports on all of its local addresses: no --nodeport-addresses, or no CIDR of that family. */
export function nodePortsOnAll(wanted: Config['nodePortAddresses'], family: ReturnType<typeof familyOf>): boolean {
  return wanted.length === 0 || (wanted[0] !== 'primary' && cidrsOfFamily(wanted, family).length === 0);
}

/** The node's addresses but `dummyName`'s, and those NodePorts listen on. */
export async function readNodeAddresses(link: LinkClient, dummyName: string, wanted: Config['nodePortAddresses'], nodeIPs: () => readonly string[]): Promise<NodeAddresses> {
  const local = (await link.localAddresses({ exclude: [dummyName] })).map((a) => a.address);
  return { nodePort: nodePortAddresses(local, wanted, nodeIPs), local };
}

/** Sets the configured IPVS timeouts; 0 leaves a timeout as it is, and nothing is written when the wanted ones are there. */
export async function setIpvsTimeouts(ipvs: IpvsClient, t: Config['ipvs']): Promise<void> {
  if (!t.tcpTimeoutMs && !t.tcpFinTimeoutMs && !t.udpTimeoutMs) return;
  const s = (ms: number) => Math.round(ms / 1000);
  const want = { tcp: s(t.tcpTimeoutMs), tcpFin: s(t.tcpFinTimeoutMs), udp: s(t.udpTimeoutMs) };
  const have = await ipvs.getTimeouts();
  if ((Object.keys(want) as Array<keyof typeof want>).some((k) => want[k] !== 0 && want[k] !== have[k])) await ipvs.setTimeouts(want);
}

/**
 * Writes the sysctls (only those that differ) and ensures the dummy link: up when Service IPs are
 * bound as routes (IPv6 takes no route through a link that is down), and holding no IP in the
 * other form (binding.ts: the wanted ones are bound first). `created`: the link was re-created
 * (it has nothing bound), null when it could not be ensured; `bound`: IPs a conversion bound;
 * `errors` names what failed.
 */
export async function ensureNodeObjects(o: {
  config: Config;
  link: LinkClient;
  dummyName: string;
  sysctl?: typeof applySysctls;
  wanted?: ReadonlyMap<string, number>;
  /** The daemon's first node step: also drops what a conversion stopped half-way left (binding.ts). */
  first?: boolean;
}): Promise<{ created: boolean | null; errors: ObjectError[]; bound: string[] }> {
  const { config } = o;
  const failed = (o.sysctl ?? applySysctls)([...ipvsSysctls({ strictARP: config.ipvs.strictARP }), ...conntrackSysctls(config.conntrack)]);
  const errors: ObjectError[] = failed.map((f) => ({ object: `sysctl ${f.key}`, reason: `cannot set ${f.key}=${f.value}: ${f.error}` }));
  const object = `link ${o.dummyName}`;
  const reason = (e: unknown) => (e instanceof Error ? e.message : String(e));
  let created: boolean;
  try {
    const ensured = await o.link.ensureDummy(o.dummyName);
    created = ensured.created;
    if (config.ipvs.addressBinding === 'route' && !ensured.link.up) await o.link.setUp(ensured.link);
  } catch (e) {
    errors.push({ object, reason: reason(e) });
    return { created: null, errors, bound: [] };
  }
  try {
    if (o.first) errors.push(...(await dropBridges(o.link)));
    if (created) return { created, errors, bound: [] };
    const converted = await convertStrays(o.link, o.dummyName, config.ipvs.addressBinding, o.wanted ?? new Map(), config.ipvs.excludeCIDRs);
    errors.push(...converted.errors);
    return { created, errors, bound: converted.bound };
  } catch (e) {
    errors.push({ object, reason: `cannot read what is bound on it: ${reason(e)}` });
    return { created, errors, bound: [] };
  }
}
