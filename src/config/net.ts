// Address syntax checks for configuration values (IPv4 and IPv6), independent of src/model; the
// model's familyOf (model/ip.ts) uses ipFamily too.

/** An address and port to listen on, e.g. { host: '0.0.0.0', port: 10256 }. */
export interface HostPort {
  host: string;
  port: number;
}

const COLON = 0x3a;
const DOT = 0x2e;

/** Whether s[from, to) is dotted-decimal IPv4 without leading zeros (what net.isIPv4 accepts). */
function isIPv4Text(s: string, from: number, to: number): boolean {
  let dots = 0;
  let digits = 0;
  let value = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c === DOT) {
      if (digits === 0 || ++dots > 3) return false;
      digits = 0;
      value = 0;
    } else {
      if (c < 0x30 || c > 0x39 || (digits > 0 && value === 0)) return false;
      value = value * 10 + c - 0x30;
      if (value > 255) return false;
      digits++;
    }
  }
  return dots === 3 && digits > 0;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

/**
 * Whether s is an IPv6 address (RFC 4291 text: eight groups of 1–4 hex digits, one `::` for a
 * run of zero groups, an IPv4 tail for the last two): what net.isIPv6 accepts, without zone ids.
 * By hand: node's check is one regular expression whose first two runs cost ~150 ms of a start-up
 * in UML (V8 compiles it to bytecode, then to machine code).
 */
function isIPv6Text(s: string): boolean {
  const n = s.length;
  if (n < 2 || n > 45) return false;
  let groups = 0; // an IPv4 tail counts two
  let gap = false; // `::` seen
  let i = 0;
  if (s.charCodeAt(0) === COLON) {
    if (s.charCodeAt(1) !== COLON) return false;
    if (n === 2) return true;
    gap = true;
    i = 2;
  }
  for (;;) {
    let j = i;
    while (j < n && j - i < 5 && isHex(s.charCodeAt(j))) j++;
    if (j < n && s.charCodeAt(j) === DOT) {
      if (!isIPv4Text(s, i, n)) return false;
      groups += 2;
      break;
    }
    if (j === i || j - i > 4) return false;
    groups++;
    if (j === n) break;
    if (s.charCodeAt(j) !== COLON || ++j === n) return false;
    if (s.charCodeAt(j) === COLON) {
      if (gap) return false;
      gap = true;
      if (++j === n) break;
    }
    i = j;
  }
  return gap ? groups <= 7 : groups === 8;
}

/** The IP family of a literal address (4 or 6), or 0 if it is not one; zone ids (fe80::1%eth0) are refused. */
export function ipFamily(text: string): 0 | 4 | 6 {
  if (isIPv4Text(text, 0, text.length)) return 4;
  return isIPv6Text(text) ? 6 : 0;
}

/** The IP family of a CIDR ("10.0.0.0/8", "fd00::/64"), or 0 if it is not one. Host bits may be set, as Go's ParseCIDR allows. */
export function cidrFamily(text: string): 0 | 4 | 6 {
  const slash = text.indexOf('/');
  if (slash < 0) return 0;
  const family = ipFamily(text.slice(0, slash));
  const bits = text.slice(slash + 1);
  if (family === 0 || !/^\d{1,3}$/.test(bits)) return 0;
  return Number(bits) <= (family === 4 ? 32 : 128) ? family : 0;
}

/** Whether the address is 0.0.0.0 or :: (any address of its family). */
export function isUnspecified(ip: string): boolean {
  return ip === '0.0.0.0' || /^[0:]+$/.test(ip);
}

/**
 * Parses "IP", "IP:port" or "[IPv6]:port" like kube-proxy's IPPortVar (a bare IP takes
 * defaultPort). Throws a RangeError whose message is the reason.
 */
export function parseHostPort(text: string, defaultPort: number): HostPort {
  const bad = (why: string): RangeError => new RangeError(`invalid address ${JSON.stringify(text)}: ${why}`);
  if (ipFamily(text) !== 0) return { host: text, port: defaultPort };
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (m === null) throw bad('expected IP or IP:port');
  const host = m[1] ?? m[2]!;
  const family = ipFamily(host);
  if (family === 0 || (family === 6) !== (m[1] !== undefined)) throw bad(`${JSON.stringify(host)} is not an IP address`);
  const port = Number(m[3]);
  if (port > 65_535) throw bad(`port ${port} out of range`);
  return { host, port };
}
