// Syntax conversions shared by flags and the config file. Each throws a RangeError whose
// message is the reason; semantic checks (scheduler names, CIDRs, ranges) live in ConfigSchema.

import { parseHostPort, type HostPort } from './net.js';

/** Go's strconv.ParseBool, as pflag uses it. */
export function toBool(text: string): boolean {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(text)) return false;
  throw new RangeError(`invalid boolean ${JSON.stringify(text)} (use true or false)`);
}

/** A decimal integer. */
export function toInt(text: string): number {
  if (!/^[-+]?\d+$/.test(text.trim())) throw new RangeError(`invalid integer ${JSON.stringify(text)}`);
  return Number(text);
}

/** A comma-separated list; items are trimmed and empty items dropped. */
export function toList(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/** kube-proxy's hostname-override handling: trimmed and lower-cased. */
export function toHostname(text: string): string {
  return text.trim().toLowerCase();
}

/** "IP[:port]" with a default port; the empty string disables the server (null). */
export function toHostPort(defaultPort: number): (text: string) => HostPort | null {
  return (text) => (text === '' ? null : parseHostPort(text, defaultPort));
}
