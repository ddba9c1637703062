// IP address text <-> bytes, canonical forms, prefix lengths.
import { isIPv4, isIPv6 } from 'node:net';

/** Address family names used across the project. */
export type Family = 'ipv4' | 'ipv6';

/** The family of an address string, or null when it is not an IP address. */
export function familyOf(address: string): Family | null {
  if (isIPv4(address)) return 'ipv4';
  if (isIPv6(address)) return 'ipv6';
  return null;
}

function parseV4(text: string, out: Uint8Array, at: number): void {
  const parts = text.split('.');
  for (let i = 0; i < 4; i++) out[at + i] = Number(parts[i]);
}

/** Parses an IPv4 (4 bytes) or IPv6 (16 bytes) address; throws on anything else. */
export function ipToBytes(address: string): Uint8Array {
  const family = familyOf(address);
  if (family === 'ipv4') {
    const out = new Uint8Array(4);
    parseV4(address, out, 0);
    return out;
  }
  if (family !== 'ipv6') throw new Error(`invalid IP address ${JSON.stringify(address)}`);
  const out = new Uint8Array(16);
  let text = address.split('%')[0]!;
  let tailV4: Uint8Array | null = null;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    tailV4 = new Uint8Array(4);
    parseV4(text.slice(lastColon + 1), tailV4, 0);
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const groups = [...headGroups, ...new Array(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
  });
  if (tailV4) out.set(tailV4, 12);
  return out;
}

/** Formats 4 or 16 bytes (or the first 4 of 16 for ipv4) as canonical text (RFC 5952 for IPv6). */
export function bytesToIp(bytes: Uint8Array, family: Family): string {
  if (family === 'ipv4') {
    if (bytes.length < 4) throw new Error('IPv4 address needs 4 bytes');
    return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  }
  if (bytes.length < 16) throw new Error('IPv6 address needs 16 bytes');
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push((bytes[i * 2]! << 8) | bytes[i * 2 + 1]!);
  // Longest run (>= 2) of zero groups becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** The canonical text of an address (e.g. `2001:db8::1`); throws when invalid. */
export function canonicalIp(address: string): string {
  const family = familyOf(address);
  if (!family) throw new Error(`invalid IP address ${JSON.stringify(address)}`);
  return bytesToIp(ipToBytes(address), family);
}

/** An address zero-padded to 16 bytes, as IPVS's union nf_inet_addr. */
export function ipTo16(address: string): Buffer {
  const out = Buffer.alloc(16);
  out.set(ipToBytes(address));
  return out;
}

/** The prefix length of a contiguous IPv4 netmask (0xffffff00 -> 24); throws if not contiguous. */
export function maskToPrefix(mask: number): number {
  let bits = 0;
  let m = mask >>> 0;
  while (m & 0x80000000) {
    bits++;
    m = (m << 1) >>> 0;
  }
  if (m !== 0) throw new Error(`non-contiguous netmask 0x${(mask >>> 0).toString(16)}`);
  return bits;
}

/** The IPv4 netmask of a prefix length (24 -> 0xffffff00). */
export function prefixToMask(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}
