// IPVS ops laid out as generic netlink messages in JS, the bytes the addon's encoder makes from
// the "ipvs" schema (native/schemas_ipvs.cc) and the attribute objects of codec.ts: same
// attributes, same order, same padding (test/unit/ipvs-wire.test.ts compares both byte for byte).
// A batch is one buffer the addon copies as it is, where request objects cost it about forty
// property reads per op (1.2 s of the JS thread for the 140,000 ops of a first sync at 10,000 ×
// 10 in UML) and left a batch's worth of small objects for the garbage collector.
// Ops are expected valid (client.ts checks them first): nothing here checks a value.
import { endianness } from 'node:os';

import { ipToBytes, parseV4 } from '../../model/ip.js';
import { constantsOf } from '../../native/binding.js';
import { AF, FWD, PROTO, flagsBytes, netmaskOf } from './codec.js';
import type { Destination, DestinationKey, ServiceKey, VirtualService } from './types.js';

const C = constantsOf('ipvs');
/** A numeric constant of the addon (an attribute number: names ending in _NAME are typed as strings). */
function num(name: string): number {
  const v: unknown = C[name];
  if (typeof v !== 'number') throw new Error(`native addon has no numeric constant ${name}`);
  return v;
}
const LE = endianness() === 'LE';
const NLM_F_REQUEST = constantsOf('netlink').NLM_F_REQUEST!;
const GENL_VERSION = C.IPVS_GENL_VERSION!;
const NLMSG_HDRLEN = 16;
const GENL_HDRLEN = 4;
const NLA_HDRLEN = 4;

const SVC = {
  af: num('IPVS_SVC_ATTR_AF'),
  protocol: num('IPVS_SVC_ATTR_PROTOCOL'),
  addr: num('IPVS_SVC_ATTR_ADDR'),
  port: num('IPVS_SVC_ATTR_PORT'),
  fwmark: num('IPVS_SVC_ATTR_FWMARK'),
  schedName: num('IPVS_SVC_ATTR_SCHED_NAME'),
  flags: num('IPVS_SVC_ATTR_FLAGS'),
  timeout: num('IPVS_SVC_ATTR_TIMEOUT'),
  netmask: num('IPVS_SVC_ATTR_NETMASK'),
  peName: num('IPVS_SVC_ATTR_PE_NAME'),
};
const DEST = {
  addr: num('IPVS_DEST_ATTR_ADDR'),
  port: num('IPVS_DEST_ATTR_PORT'),
  fwdMethod: num('IPVS_DEST_ATTR_FWD_METHOD'),
  weight: num('IPVS_DEST_ATTR_WEIGHT'),
  uThresh: num('IPVS_DEST_ATTR_U_THRESH'),
  lThresh: num('IPVS_DEST_ATTR_L_THRESH'),
  addrFamily: num('IPVS_DEST_ATTR_ADDR_FAMILY'),
};

const NEST = { service: num('IPVS_CMD_ATTR_SERVICE'), dest: num('IPVS_CMD_ATTR_DEST') };

const align4 = (n: number): number => (n + 3) & ~3;

/** Appends IPVS op messages to one growing buffer; see the file comment. */
export class IpvsWire {
  #buf: Buffer;
  #view: DataView;
  #len = 0;
  #count = 0;
  /** Where each service's key nest was first written in this batch: later ops copy it. */
  readonly #keyAt = new Map<ServiceKey, { at: number; end: number }>();

  /** `size`: the bytes to start with (the buffer doubles when full). */
  constructor(
    private readonly familyId: number,
    size = 16 * 1024,
  ) {
    this.#buf = Buffer.allocUnsafe(size);
    this.#view = new DataView(this.#buf.buffer, this.#buf.byteOffset, this.#buf.length);
  }

  /** The messages written so far. */
  get count(): number {
    return this.#count;
  }

  /** Whether a message keyed by this service object was written (its key was checked then). */
  knows(key: ServiceKey): boolean {
    return this.#keyAt.has(key);
  }

  /** The bytes of the messages written so far (a view, valid until the next write). */
  bytes(): Buffer {
    return this.#buf.subarray(0, this.#len);
  }

  /** NEW_SERVICE / SET_SERVICE: the whole service. */
  service(cmd: number, s: VirtualService): void {
    const m = this.#begin(cmd);
    const n = this.#nestBegin(NEST.service);
    this.#keyAttrs(s);
    this.#string(SVC.schedName, s.scheduler);
    this.#bytes(SVC.flags, flagsBytes(s));
    this.#u32(SVC.timeout, s.timeout);
    this.#bytes(SVC.netmask, netmaskOf(s));
    if (s.pe) this.#string(SVC.peName, s.pe);
    this.#nestEnd(n);
    this.#end(m);
  }

  /** DEL_SERVICE, and NEW/SET/DEL_DEST with `dest` (`full`: every attribute NEW/SET need, else the key). */
  serviceKeyed(cmd: number, key: ServiceKey, dest?: { d: Destination | DestinationKey; full: boolean }): void {
    const m = this.#begin(cmd);
    const known = this.#keyAt.get(key);
    if (known) {
      this.#copy(known.at, known.end);
    } else {
      const n = this.#nestBegin(NEST.service);
      this.#keyAttrs(key);
      this.#nestEnd(n);
      this.#keyAt.set(key, { at: n, end: this.#len });
    }
    if (dest) {
      const n = this.#nestBegin(NEST.dest);
      const { d } = dest;
      this.#addr(DEST.addr, d.address);
      this.#be16(DEST.port, d.port);
      if (dest.full) {
        const full = d as Destination;
        this.#u32(DEST.fwdMethod, FWD[full.forward]);
        this.#u32(DEST.weight, full.weight);
        this.#u32(DEST.uThresh, full.upperThreshold);
        this.#u32(DEST.lThresh, full.lowerThreshold);
      }
      this.#u16(DEST.addrFamily, AF[d.address.includes(':') ? 'ipv6' : 'ipv4']);
      this.#nestEnd(n);
    }
    this.#end(m);
  }

  #keyAttrs(k: ServiceKey): void {
    this.#u16(SVC.af, AF[k.family]);
    if (k.fwmark !== null) {
      this.#u32(SVC.fwmark, k.fwmark);
      return;
    }
    this.#u16(SVC.protocol, PROTO[k.protocol!]);
    this.#addr(SVC.addr, k.address!);
    this.#be16(SVC.port, k.port!);
  }

  #room(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
    this.#view = new DataView(next.buffer, next.byteOffset, next.length);
  }

  #begin(cmd: number): number {
    this.#room(NLMSG_HDRLEN + GENL_HDRLEN);
    const at = this.#len;
    const v = this.#view;
    v.setUint32(at, 0, LE); // length, set by #end
    v.setUint16(at + 4, this.familyId, LE);
    v.setUint16(at + 6, NLM_F_REQUEST, LE);
    v.setUint32(at + 8, 0, LE); // seq and pid: the addon's
    v.setUint32(at + 12, 0, LE);
    v.setUint8(at + 16, cmd);
    v.setUint8(at + 17, GENL_VERSION);
    v.setUint16(at + 18, 0, LE);
    this.#len += NLMSG_HDRLEN + GENL_HDRLEN;
    return at;
  }

  #end(at: number): void {
    this.#view.setUint32(at, this.#len - at, LE);
    this.#count++;
  }

  #nestBegin(type: number): number {
    this.#room(NLA_HDRLEN);
    const at = this.#len;
    this.#view.setUint16(at + 2, type, LE);
    this.#len += NLA_HDRLEN;
    return at;
  }

  #nestEnd(at: number): void {
    this.#view.setUint16(at, this.#len - at, LE);
  }

  /** An attribute header for `len` payload bytes, the padding after them zeroed; returns the payload's offset. */
  #attr(type: number, len: number): number {
    const size = align4(NLA_HDRLEN + len);
    this.#room(size);
    const at = this.#len;
    this.#view.setUint16(at, NLA_HDRLEN + len, LE);
    this.#view.setUint16(at + 2, type, LE);
    if (size > NLA_HDRLEN + len) this.#buf.fill(0, at + NLA_HDRLEN + len, at + size);
    this.#len += size;
    return at + NLA_HDRLEN;
  }

  // (#attr first: it may replace the buffer and its view.)
  #u16(type: number, value: number): void {
    const at = this.#attr(type, 2);
    this.#view.setUint16(at, value, LE);
  }

  #be16(type: number, value: number): void {
    const at = this.#attr(type, 2);
    this.#view.setUint16(at, value, false);
  }

  #u32(type: number, value: number): void {
    const at = this.#attr(type, 4);
    this.#view.setUint32(at, value, LE);
  }

  #bytes(type: number, value: Uint8Array): void {
    const at = this.#attr(type, value.length);
    this.#buf.set(value, at);
  }

  /** A NUL-terminated string (scheduler and PE names: ASCII). */
  #string(type: number, value: string): void {
    const at = this.#attr(type, value.length + 1);
    this.#buf.write(value, at, 'latin1');
    this.#buf[at + value.length] = 0;
  }

  /** An address as the kernel's 16-byte union nf_inet_addr (IPv4 zero-padded). */
  #addr(type: number, address: string): void {
    const at = this.#attr(type, 16);
    if (address.includes(':')) {
      this.#buf.set(ipToBytes(address), at);
    } else {
      parseV4(address, this.#buf, at);
      this.#buf.fill(0, at + 4, at + 16);
    }
  }

  #copy(from: number, to: number): void {
    this.#room(to - from);
    this.#buf.copyWithin(this.#len, from, to);
    this.#len += to - from;
  }
}
