// CIDR helpers for desired state: canonical network text, containment, loopback.
import { cidrFamily } from '../../config/net.js';
import { bytesToIp, familyOf, ipToBytes, type Family } from '../../model/ip.js';

/** A parsed CIDR: the network address in canonical text, its prefix length and family. */
export interface Cidr {
  network: string;
  prefix: number;
  family: Family;
}

function masked(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = out[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

/** Parses `10.0.0.5/24` (spaces trimmed) into `10.0.0.0/24`; null when it is not a CIDR. */
export function parseCidr(text: string): Cidr | null {
  const t = text.trim();
  const f = cidrFamily(t);
  if (f === 0) return null;
  const slash = t.indexOf('/');
  const family: Family = f === 4 ? 'ipv4' : 'ipv6';
  const prefix = Number(t.slice(slash + 1));
  const network = bytesToIp(masked(ipToBytes(t.slice(0, slash)), prefix), family);
  return { network, prefix, family };
}

/** `network/prefix`. */
export function formatCidr(c: Cidr): string {
  return `${c.network}/${c.prefix}`;
}

/** True when `ip` is inside `cidr` (same family only). */
export function cidrContains(cidr: Cidr, ip: string): boolean {
  if (familyOf(ip) !== cidr.family) return false;
  return bytesToIp(masked(ipToBytes(ip), cidr.prefix), cidr.family) === cidr.network;
}

/** 127.0.0.0/8 or ::1. */
export function isLoopback(ip: string): boolean {
  const f = familyOf(ip);
  if (f === 'ipv4') return ip.startsWith('127.');
  return f === 'ipv6' && bytesToIp(ipToBytes(ip), 'ipv6') === '::1';
}
