// Address syntax checks for configuration values (IPv4 and IPv6), independent of src/model.

import { isIP } from 'node:net';

/** An address and port to listen on, e.g. { host: '0.0.0.0', port: 10256 }. */
export interface HostPort {
  host: string;
  port: number;
}

/** The IP family of a literal address (4 or 6), or 0 if it is not one; zone ids (fe80::1%eth0) are refused. */
export function ipFamily(text: string): 0 | 4 | 6 {
  if (text.includes('%')) return 0;
  return isIP(text) as 0 | 4 | 6;
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
