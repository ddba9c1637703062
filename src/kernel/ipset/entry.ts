// ipset entry text <-> entry fields, per set type. The grammar is ipset(8)'s: what
// `ipset save` prints, `ipset restore` reads, and this client reads and prints.
import { bytesToIp, familyOf, ipToBytes } from '../../model/ip.js';
import type { IpsetFamily, SetType } from './types.js';

/** An address: IPv4 as an unsigned 32-bit number, IPv6 as 16 bytes. */
export type Addr = number | Uint8Array;

/** One entry: the element's parts and its options, as numbers the kernel takes. */
export interface Entry {
  ip?: Addr;
  cidr?: number;
  proto?: number;
  port?: number;
  ip2?: Addr;
  cidr2?: number;
  timeout?: number;
  nomatch?: boolean;
  comment?: string;
  packets?: bigint;
  bytes?: bigint;
  /** Listed only (types this client does not write): hash:ip,mark, hash:*mac, hash:net,iface, list:set. */
  mark?: number;
  ether?: Uint8Array;
  iface?: string;
  setName?: string;
}

/** An entry ipset would not accept; `reason` says why. */
export class EntrySyntaxError extends Error {
  override readonly name = 'EntrySyntaxError';
}

/** Protocols an entry may name (ipset prints the names from /etc/protocols). */
const PROTO_BY_NAME: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, udplite: 136 };
const PROTO_NAMES: Record<number, string> = { 0: 'ip', 1: 'icmp', 6: 'tcp', 17: 'udp', 47: 'gre', 50: 'esp', 51: 'ah', 58: 'icmpv6', 132: 'sctp', 136: 'udplite' };

/** The kernel's maximum timeout in seconds (IPSET_MAX_TIMEOUT in ip_set_timeout.h). */
export const MAX_TIMEOUT = 2147483;
const MAX_COMMENT = 255;

/** Entry types whose elements take `nomatch` (IPSET_FLAG_NOMATCH). */
const NOMATCH_TYPES: ReadonlySet<SetType> = new Set(['hash:net', 'hash:ip,port,net']);

function fail(reason: string): never {
  throw new EntrySyntaxError(reason);
}

/** Parses a dotted-quad IPv4 address (no leading zeros) to a number, or returns -1. */
export function parseV4(s: string): number {
  let value = 0;
  let part = -1;
  let dots = 0;
  let digits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (part < 0 || dots === 3) return -1;
      value = value * 256 + part;
      part = -1;
      digits = 0;
      dots++;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && part === 0) return -1;
      part = (part < 0 ? 0 : part) * 10 + (c - 48);
      if (part > 255) return -1;
      digits++;
    } else {
      return -1;
    }
  }
  if (part < 0 || dots !== 3) return -1;
  return value * 256 + part;
}

function parseAddr(s: string, family: IpsetFamily, what: string): Addr {
  if (family === 'inet') {
    const v = parseV4(s);
    if (v < 0) fail(`${what}: ${JSON.stringify(s)} is not an IPv4 address`);
    return v;
  }
  if (s.includes('%') || familyOf(s) !== 'ipv6') fail(`${what}: ${JSON.stringify(s)} is not an IPv6 address`);
  return ipToBytes(s);
}

function parseUint(s: string, max: number, what: string): number {
  const n = s.length;
  let v = n === 0 || n > 10 || (n > 1 && s.charCodeAt(0) === 48) ? -1 : 0;
  for (let i = 0; i < n && v >= 0; i++) {
    const d = s.charCodeAt(i) - 48;
    v = d >= 0 && d <= 9 ? v * 10 + d : -1;
  }
  if (v < 0) fail(`${what}: ${JSON.stringify(s)} is not a number`);
  if (v > max) fail(`${what}: ${v} is out of range (max ${max})`);
  return v;
}

function parseCidr(s: string | undefined, family: IpsetFamily, what: string): number {
  const max = family === 'inet' ? 32 : 128;
  if (s === undefined) return max;
  const v = parseUint(s, max, what);
  if (v === 0) fail(`${what}: prefix length must be 1..${max}`);
  return v;
}

function parseNet(s: string, family: IpsetFamily, what: string): [Addr, number] {
  const slash = s.indexOf('/');
  if (slash < 0) return [parseAddr(s, family, what), parseCidr(undefined, family, what)];
  return [parseAddr(s.slice(0, slash), family, what), parseCidr(s.slice(slash + 1), family, `${what} prefix`)];
}

function parseProtoPort(s: string, e: Entry): void {
  const colon = s.indexOf(':');
  const name = colon < 0 ? 'tcp' : s.slice(0, colon);
  const proto = PROTO_BY_NAME[name];
  if (proto === undefined) fail(`protocol ${JSON.stringify(name)} is not one of tcp, udp, sctp, udplite`);
  e.proto = proto;
  e.port = parseUint(colon < 0 ? s : s.slice(colon + 1), 65535, 'port');
}

/** Parses the element part (no options) of an entry of `type` into `e`. */
function parseElement(type: SetType, family: IpsetFamily, text: string, e: Entry): void {
  const parts = text.split(',');
  const want = type === 'hash:ip' || type === 'hash:net' || type === 'bitmap:port' ? 1 : type === 'hash:ip,port' ? 2 : 3;
  if (parts.length !== want) fail(`a ${type} element has ${want} part${want > 1 ? 's' : ''} separated by ","`);
  switch (type) {
    case 'hash:ip':
      e.ip = parseAddr(parts[0]!, family, 'address');
      return;
    case 'hash:net':
      [e.ip, e.cidr] = parseNet(parts[0]!, family, 'network');
      return;
    case 'bitmap:port':
      e.port = parseUint(parts[0]!, 65535, 'port');
      return;
    default:
      e.ip = parseAddr(parts[0]!, family, 'address');
      parseProtoPort(parts[1]!, e);
      if (type === 'hash:ip,port,ip') e.ip2 = parseAddr(parts[2]!, family, 'second address');
      if (type === 'hash:ip,port,net') [e.ip2, e.cidr2] = parseNet(parts[2]!, family, 'network');
  }
}

/**
 * Parses one entry of a set of `type` and `family`: the element as ipset prints it, then
 * optional `timeout N`, `nomatch`, `packets N`, `bytes N`, `comment "text"`. Throws EntrySyntaxError.
 */
export function parseEntry(type: SetType, family: IpsetFamily, text: string): Entry {
  const e: Entry = {};
  const space = text.indexOf(' ');
  parseElement(type, family, space < 0 ? text : text.slice(0, space), e);
  if (space < 0) return e;
  const words = new OptionWords(text, space);
  for (let word = words.next(); word !== null; word = words.next()) {
    if (word === 'timeout') e.timeout = parseUint(words.arg(word), MAX_TIMEOUT, 'timeout');
    else if (word === 'packets' || word === 'bytes') {
      const v = words.arg(word);
      if (!/^\d{1,20}$/.test(v) || BigInt(v) > 0xffffffffffffffffn) fail(`${word}: ${JSON.stringify(v)} is not a counter`);
      e[word] = BigInt(v);
    } else if (word === 'nomatch') {
      if (!NOMATCH_TYPES.has(type)) fail(`nomatch is not supported by ${type}`);
      e.nomatch = true;
    } else if (word === 'comment') {
      const c = words.quoted();
      if (c === '') fail('comment needs a non-empty value (the kernel keeps no empty comment)');
      if (Buffer.byteLength(c) > MAX_COMMENT) fail(`comment longer than ${MAX_COMMENT} bytes`);
      e.comment = c;
    } else fail(`unexpected ${JSON.stringify(word)}`);
  }
  return e;
}

/** The space-separated option words after an element; `comment` takes a "quoted" argument. */
class OptionWords {
  constructor(
    private readonly text: string,
    private at: number,
  ) {}

  private skip(): void {
    while (this.text.charCodeAt(this.at) === 32) this.at++;
  }

  next(): string | null {
    this.skip();
    if (this.at >= this.text.length) return null;
    let end = this.text.indexOf(' ', this.at);
    if (end < 0) end = this.text.length;
    const word = this.text.slice(this.at, end);
    this.at = end;
    return word;
  }

  arg(option: string): string {
    const v = this.next();
    if (v === null) fail(`${option} needs a value`);
    return v;
  }

  quoted(): string {
    this.skip();
    const close = this.text.indexOf('"', this.at + 1);
    if (this.text[this.at] !== '"' || close < 0) fail('comment needs a "quoted" value');
    const c = this.text.slice(this.at + 1, close);
    this.at = close + 1;
    if (this.at < this.text.length && this.text[this.at] !== ' ') fail('text after the comment\'s closing quote');
    return c;
  }
}

/** IPv4 number -> dotted quad. */
export function formatV4(v: number): string {
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

/** 16 bytes -> text exactly as inet_ntop prints it (and hence ipset), e.g. `::ffff:1.2.3.4`. */
export function formatV6(b: Uint8Array): string {
  return bytesToIp(b, 'ipv6');
}

/** An address as ipset prints it. */
export function formatAddr(a: Addr): string {
  return typeof a === 'number' ? formatV4(a) : formatV6(a);
}

function formatNet(a: Addr, cidr: number | undefined): string {
  const max = typeof a === 'number' ? 32 : 128;
  return cidr === undefined || cidr === max ? formatAddr(a) : `${formatAddr(a)}/${cidr}`;
}

/** `tcp:80`, `icmp:8/0` (ipset prints ICMP type names; we print type/code, which it reads too). */
export function formatProtoPort(proto: number, port: number): string {
  const name = PROTO_NAMES[proto] ?? String(proto);
  if (proto === 1 || proto === 58) return `${name}:${port >> 8}/${port & 255}`;
  return `${name}:${port}`;
}

/** The element of another set type: the parts it has, in ipset's order (best effort, untested). */
function formatOther(e: Entry): string {
  const parts: string[] = [];
  if (e.ip !== undefined) parts.push(formatNet(e.ip, e.cidr));
  if (e.ether) parts.push(Array.from(e.ether, (b) => b.toString(16).toUpperCase().padStart(2, '0')).join(':'));
  if (e.port !== undefined) parts.push(e.proto !== undefined ? formatProtoPort(e.proto, e.port) : String(e.port));
  if (e.ip2 !== undefined) parts.push(formatNet(e.ip2, e.cidr2));
  if (e.mark !== undefined) parts.push(`0x${e.mark.toString(16).padStart(8, '0')}`);
  if (e.iface !== undefined) parts.push(e.iface);
  if (e.setName !== undefined) parts.push(e.setName);
  return parts.join(',');
}

/** Formats an entry of a set of `type` as `ipset list` prints the member line. */
export function formatEntry(type: string, e: Entry): string {
  let s: string;
  switch (type) {
    case 'bitmap:port':
      s = String(e.port ?? 0);
      break;
    case 'hash:ip':
      s = formatAddr(e.ip ?? 0);
      break;
    case 'hash:net':
      s = formatNet(e.ip ?? 0, e.cidr);
      break;
    case 'hash:ip,port':
    case 'hash:ip,port,ip':
    case 'hash:ip,port,net':
      s = `${formatAddr(e.ip ?? 0)},${formatProtoPort(e.proto ?? 0, e.port ?? 0)}`;
      if (type === 'hash:ip,port,ip') s += `,${formatAddr(e.ip2 ?? 0)}`;
      if (type === 'hash:ip,port,net') s += `,${formatNet(e.ip2 ?? 0, e.cidr2)}`;
      break;
    default:
      s = formatOther(e);
  }
  if (e.timeout !== undefined) s += ` timeout ${e.timeout}`;
  if (e.nomatch) s += ' nomatch';
  if (e.packets !== undefined) s += ` packets ${e.packets}`;
  if (e.bytes !== undefined) s += ` bytes ${e.bytes}`;
  if (e.comment !== undefined) s += ` comment "${e.comment}"`;
  return s;
}
