// The API server's rules for names, namespaces, port names, labels and annotation keys
// (k8s.io/apimachinery/pkg/util/validation and pkg/apis/core/validation), applied by both sources
// to the objects they deliver: an object the API server would refuse is refused here too.
import type { EndpointSlice, Node, Service } from '../model/k8s.js';

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_LABEL = new RegExp(`^${LABEL}$`);
const DNS1123_SUBDOMAIN = new RegExp(`^${LABEL}(\\.${LABEL})*$`);
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const IANA_SVC_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** Total size of an object's annotations (keys + values), as the API server limits it. */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** One broken rule: the field path (from the object's root) and why. */
export interface NameIssue {
  path: PropertyKey[];
  message: string;
}

/** null when `s` is a DNS-1123 label (RFC 1123: lower-case alphanumerics and '-', ≤ 63), else why not. */
export function checkDns1123Label(s: string): string | null {
  if (s.length > 63) return 'must be no more than 63 characters';
  return DNS1123_LABEL.test(s) ? null : "a DNS-1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
}

/** null when `s` is a DNS-1123 subdomain (dot-separated labels, ≤ 253), else why not. */
export function checkDns1123Subdomain(s: string): string | null {
  if (s.length > 253) return 'must be no more than 253 characters';
  return DNS1123_SUBDOMAIN.test(s)
    ? null
    : "a DNS-1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
}

/** null when `s` is a DNS-1035 label (like DNS-1123, but starting with a letter), else why not. */
export function checkDns1035Label(s: string): string | null {
  if (s.length > 63) return 'must be no more than 63 characters';
  return DNS1035_LABEL.test(s)
    ? null
    : "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
}

/** null when `s` is a qualified name (label and annotation keys: `[prefix/]name`), else why not. */
export function checkQualifiedName(s: string): string | null {
  const parts = s.split('/');
  if (parts.length > 2) return "a qualified name must have at most one '/'";
  const name = parts.at(-1)!;
  if (parts.length === 2) {
    if (parts[0] === '') return 'prefix part must be non-empty';
    const bad = checkDns1123Subdomain(parts[0]!);
    if (bad) return `prefix part ${bad}`;
  }
  if (name === '') return 'name part must be non-empty';
  if (name.length > 63) return 'name part must be no more than 63 characters';
  return QUALIFIED_NAME.test(name)
    ? null
    : "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
}

/** null when `s` is a valid label value (≤ 63, may be empty), else why not. */
export function checkLabelValue(s: string): string | null {
  if (s.length > 63) return 'must be no more than 63 characters';
  return LABEL_VALUE.test(s) ? null : "a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
}

/** null when `s` is an IANA service name (a named targetPort: ≤ 15, a letter, no '--'), else why not. */
export function checkPortName(s: string): string | null {
  if (s.length > 15) return 'must be no more than 15 characters';
  if (!IANA_SVC_NAME.test(s)) return "must contain only lower case alphanumeric characters and '-', and start and end with an alphanumeric character";
  if (s.includes('--')) return "must not contain consecutive hyphens";
  return /[a-z]/.test(s) ? null : 'must contain at least one letter';
}

/** A value for messages: JSON-quoted (no raw newlines reach a log) and cut at 100 characters. */
export function quote(s: string): string {
  return JSON.stringify(s.length > 100 ? `${s.slice(0, 100)}…` : s);
}

function check(out: NameIssue[], path: PropertyKey[], value: string, rule: (s: string) => string | null, what = 'value'): void {
  const bad = rule(value);
  if (bad) out.push({ path, message: `invalid ${what} ${quote(value)}: ${bad}` });
}

function checkMetadata(out: NameIssue[], md: Service['metadata'], nameRule: (s: string) => string | null, namespaced: boolean): void {
  check(out, ['metadata', 'name'], md.name, nameRule);
  if (namespaced) check(out, ['metadata', 'namespace'], md.namespace, checkDns1123Label);
  for (const [k, v] of Object.entries(md.labels)) {
    check(out, ['metadata', 'labels', k], k, checkQualifiedName, 'key');
    check(out, ['metadata', 'labels', k], v, checkLabelValue);
  }
  let size = 0;
  for (const [k, v] of Object.entries(md.annotations)) {
    // NOTE: the API server checks annotation keys lower-cased (ValidateAnnotations), label keys as they are.
    if (checkQualifiedName(k.toLowerCase())) check(out, ['metadata', 'annotations', k], k, checkQualifiedName, 'key');
    size += Buffer.byteLength(k) + Buffer.byteLength(v);
  }
  if (size > MAX_ANNOTATIONS_BYTES) out.push({ path: ['metadata', 'annotations'], message: `too long: ${size} bytes, at most ${MAX_ANNOTATIONS_BYTES}` });
}

function checkUniqueNames(out: NameIssue[], base: PropertyKey[], names: string[], skipEmpty: boolean): void {
  const seen = new Set<string>();
  names.forEach((n, i) => {
    if (skipEmpty && n === '') return;
    if (seen.has(n)) out.push({ path: [...base, i, 'name'], message: `duplicate value ${quote(n)}` });
    seen.add(n);
  });
}

/** Service: name DNS-1035, port names DNS-1123 labels (required and unique when > 1 port). */
export function checkServiceNames(s: Service): NameIssue[] {
  const out: NameIssue[] = [];
  checkMetadata(out, s.metadata, checkDns1035Label, true);
  const ports = s.spec.ports;
  ports.forEach((p, i) => {
    if (p.name === '' && ports.length > 1) out.push({ path: ['spec', 'ports', i, 'name'], message: 'required when the Service has more than one port' });
    else if (p.name !== '') check(out, ['spec', 'ports', i, 'name'], p.name, checkDns1123Label);
    if (typeof p.targetPort === 'string') check(out, ['spec', 'ports', i, 'targetPort'], p.targetPort, checkPortName);
    else if (p.targetPort !== undefined && (p.targetPort < 1 || p.targetPort > 65535)) {
      out.push({ path: ['spec', 'ports', i, 'targetPort'], message: `must be between 1 and 65535, got ${p.targetPort}` });
    }
  });
  checkUniqueNames(out, ['spec', 'ports'], ports.map((p) => p.name), true);
  return out;
}

/** EndpointSlice: name DNS-1123 subdomain, port names DNS-1123 labels or empty (unique), node names. */
export function checkEndpointSliceNames(s: EndpointSlice): NameIssue[] {
  const out: NameIssue[] = [];
  checkMetadata(out, s.metadata, checkDns1123Subdomain, true);
  s.ports.forEach((p, i) => {
    if (p.name !== '') check(out, ['ports', i, 'name'], p.name, checkDns1123Label);
  });
  checkUniqueNames(out, ['ports'], s.ports.map((p) => p.name), false);
  s.endpoints.forEach((e, i) => {
    if (e.nodeName !== undefined) check(out, ['endpoints', i, 'nodeName'], e.nodeName, checkDns1123Subdomain);
    if (e.hostname !== undefined) check(out, ['endpoints', i, 'hostname'], e.hostname, checkDns1123Label);
  });
  return out;
}

/** Node: name DNS-1123 subdomain, labels and annotation keys. */
export function checkNodeNames(n: Node): NameIssue[] {
  const out: NameIssue[] = [];
  checkMetadata(out, n.metadata, checkDns1123Subdomain, false);
  return out;
}
