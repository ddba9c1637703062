// IP address text <-> bytes, canonical forms, prefix lengths.
import { ipFamily } from '../config/net.js';

/** Address family names used across the project. */
export type Family = 'ipv4' | 'ipv6';

/** The family of an address string, or null when it is not an IP address. */
export function familyOf(address: string): Family | null {
  const f = ipFamily(address);
  return f === 4 ? 'ipv4' : f === 6 ? 'ipv6' : null;
}

/** A valid dotted quad's 4 bytes into `out` at `at`, digit by digit (no split: it runs once per real server of a first sync). */
export function parseV4(text: string, out: Uint8Array, at: number): void {
  let octet = 0;
  let i = at;
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (c === 0x2e) {
      out[i++] = octet;
      octet = 0;
    } else {
      octet = octet * 10 + (c - 0x30);
    }
  }
  out[i] = octet;
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

/** Formats 4 or 16 bytes (or the first 4 of 16 for ipv4) as canonical text (inet_ntop's form). */
export function bytesToIp(bytes: Uint8Array, family: Family): string {
  if (family === 'ipv4') {
    if (bytes.length < 4) throw new Error('IPv4 address needs 4 bytes');
    return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  }
  if (bytes.length < 16) throw new Error('IPv6 address needs 16 bytes');
  return formatIpv6(bytes);
}

/** 16 bytes -> text exactly as glibc's inet_ntop prints it (as ip, ipvsadm and ipset do), e.g. `::ffff:1.2.3.4`. */
function formatIpv6(b: Uint8Array): string {
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push((b[i * 2]! << 8) | b[i * 2 + 1]!);
  // The longest run (>= 2) of zero groups becomes "::".
  let base = -1;
  let len = 0;
  for (let i = 0; i < 8; ) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > len) [base, len] = [i, j - i];
    i = j;
  }
  if (len < 2) base = -1;
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (base >= 0 && i >= base && i < base + len) {
      if (i === base) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    // IPv4-compatible (::a.b.c.d) and IPv4-mapped (::ffff:a.b.c.d) addresses end in a dotted quad.
    if (i === 6 && base === 0 && (len === 6 || (len === 5 && w[5] === 0xffff))) {
      return `${out}${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
    }
    out += w[i]!.toString(16);
  }
  return base >= 0 && base + len === 8 ? `${out}:` : out;
}

/** The canonical text of an address (e.g. `2001:db8::1`); throws when invalid. */
export function canonicalIp(address: string): string {
  const family = familyOf(address);
  if (!family) throw new Error(`invalid IP address ${JSON.stringify(address)}`);
  // ipFamily accepts only canonical dotted decimal (no leading zeros, no spaces): the same
  // string, not a copy (the tracker canonicalises every endpoint of every slice event).
  if (family === 'ipv4') return address;
  return bytesToIp(ipToBytes(address), family);
}

/** An address zero-padded to 16 bytes, as IPVS's union nf_inet_addr. */
export function ipTo16(address: string): Buffer {
  // A slice of Node's shared pool, not an ArrayBuffer of its own: the first sync encodes one per
  // real server (30,000 at 3,000 Services), and the encoder only reads it.
  const out = Buffer.allocUnsafe(16).fill(0);
  if (familyOf(address) === 'ipv4') parseV4(address, out, 0);
  else out.set(ipToBytes(address));
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

/** True when `address` lies within `cidr` (same family only); false for malformed input. */
export function inCidr(address: string, cidr: string): boolean {
  const [net, bitsText] = cidr.split('/');
  const family = familyOf(address);
  if (!net || family === null || familyOf(net) !== family) return false;
  const a = ipToBytes(address);
  const n = ipToBytes(net);
  const bits = bitsText === undefined ? a.length * 8 : Number(bitsText);
  if (!Number.isInteger(bits) || bits < 0 || bits > a.length * 8) return false;
  for (let i = 0; i < bits; i++) {
    const mask = 0x80 >> (i % 8);
    if ((a[i >> 3]! & mask) !== (n[i >> 3]! & mask)) return false;
  }
  return true;
}

/** The CIDRs of one IP family. */
export const cidrsOfFamily = (cidrs: readonly string[], family: Family | null): string[] =>
  cidrs.filter((c) => familyOf(c.slice(0, c.indexOf('/'))) === family);
