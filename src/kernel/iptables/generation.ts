// What lets a verification skip iptables-save when nothing changed: a token of the tables as the
// kernel holds them, read without a process. nft: nf_tables' ruleset generation, which every
// commit in the network namespace moves. legacy: the tables' rule blobs (what iptables-save
// itself reads), counters zeroed, hashed.
import { createHash } from 'node:crypto';

import { constantsOf, native } from '../../native/binding.js';
import { NetlinkConnection } from '../netlink.js';
import type { Backend, Family, Table } from './types.js';

/** Reads a token of `tables`; null where it cannot be read (the caller then reads the rules). */
export type GenerationReader = (backend: Backend, family: Family, tables: readonly Table[]) => Promise<string | null>;

const NFT = constantsOf('nft');
const NFGEN_HEADER = { family: 0, version: 0, resId: 0 };

async function nftGeneration(): Promise<number> {
  const conn = new NetlinkConnection(constantsOf('netlink').NETLINK_NETFILTER!);
  try {
    const [reply] = await conn.request('nft.gen', { type: (NFT.NFNL_SUBSYS_NFTABLES! << 8) | NFT.NFT_MSG_GETGEN!, header: NFGEN_HEADER }, 'nft.getgen');
    const id = reply?.attrs.id;
    if (typeof id !== 'number') throw new Error('nft.getgen: no generation in the reply');
    return id;
  } finally {
    conn.close();
  }
}

async function legacyTables(family: Family, tables: readonly Table[]): Promise<string> {
  const h = createHash('sha256');
  for (const table of [...tables].sort()) {
    h.update(`${table}\0`);
    try {
      h.update(await native.xtablesTable(family === 'ipv6' ? 6 : 4, table));
    } catch (e) {
      if ((e as { code?: string }).code !== 'ENOENT') throw e;
      h.update('absent'); // iptables-save prints nothing for it either
    }
  }
  return h.digest('base64');
}

/** The kernel's token: `nft:<generation>` (every family), or `legacy:<hash of the tables>`. */
export const kernelGeneration: GenerationReader = async (backend, family, tables) => {
  try {
    return backend === 'nft' ? `nft:${await nftGeneration()}` : `legacy:${await legacyTables(family, tables)}`;
  } catch {
    return null; // e.g. no nf_tables or ip_tables here: iptables-save reads (and reports) instead
  }
};
