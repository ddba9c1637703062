// The API server's name rules as applied by validate() (shared by both sources): table tests of the
// rule functions, then whole objects: what is refused, with which field path and reason.
import { describe, expect, it } from 'vitest';

import {
  checkDns1035Label,
  checkDns1123Label,
  checkDns1123Subdomain,
  checkLabelValue,
  checkPortName,
  checkQualifiedName,
} from '../../src/source/names.js';
import { validate } from '../../src/source/validate.js';

const ok = (f: (s: string) => string | null, s: string): boolean => f(s) === null;

describe('rules', () => {
  const long = (n: number): string => 'a'.repeat(n);
  it.each([
    // value, DNS-1123 label, DNS-1123 subdomain, DNS-1035 label
    ['web', true, true, true],
    ['a', true, true, true],
    ['0web', true, true, false],
    ['web-1', true, true, true],
    ['web.example', false, true, false],
    ['a.b.c', false, true, false],
    ['Web', false, false, false],
    ['-web', false, false, false],
    ['web-', false, false, false],
    ['web_1', false, false, false],
    ['', false, false, false],
    ['web..x', false, false, false],
    ['.web', false, false, false],
    ['evil\n-A INPUT -j DROP', false, false, false],
    ['web\n', false, false, false],
    ['wéb', false, false, false],
    [long(63), true, true, true],
    [long(64), false, true, false],
    [`${long(63)}.${long(63)}.${long(63)}.${long(61)}`, false, true, false],
    [`${long(63)}.${long(63)}.${long(63)}.${long(62)}`, false, false, false],
  ])('%j: label %s, subdomain %s, dns-1035 %s', (value, label, subdomain, dns1035) => {
    expect(ok(checkDns1123Label, value)).toBe(label);
    expect(ok(checkDns1123Subdomain, value)).toBe(subdomain);
    expect(ok(checkDns1035Label, value)).toBe(dns1035);
  });

  it.each([
    ['app', true],
    ['kubernetes.io/service-name', true],
    ['topology.kubernetes.io/zone', true],
    ['App_Name.v1', true],
    ['a/b/c', false],
    ['/name', false],
    ['prefix/', false],
    ['Prefix.IO/name', false],
    ['-name', false],
    ['name-', false],
    ['na me', false],
    [`${'a'.repeat(63)}`, true],
    [`${'a'.repeat(64)}`, false],
    ['', false],
  ])('qualified name %j: %s', (value, valid) => expect(ok(checkQualifiedName, value)).toBe(valid));

  it.each([
    ['', true],
    ['web', true],
    ['Web_1.x', true],
    ['-x', false],
    ['x y', false],
    ['a'.repeat(63), true],
    ['a'.repeat(64), false],
  ])('label value %j: %s', (value, valid) => expect(ok(checkLabelValue, value)).toBe(valid));

  it.each([
    ['http', true],
    ['http-alt', true],
    ['h2c', true],
    ['8080', false],
    ['http--alt', false],
    ['-http', false],
    ['HTTP', false],
    ['a-very-long-name', false],
    ['a'.repeat(15), true],
  ])('named targetPort %j: %s', (value, valid) => expect(ok(checkPortName, value)).toBe(valid));
});

function service(name: unknown, ports: unknown[] = [{ name: 'http', port: 80 }], extra: Record<string, unknown> = {}): unknown {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'demo', ...extra }, spec: { clusterIP: '10.96.0.10', ports } };
}

function slice(name: unknown, ports: unknown[] = [{ name: 'http', port: 8080 }], endpoints: unknown[] = []): unknown {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'demo', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    ports,
    endpoints,
  };
}

const reason = (kind: 'Service' | 'EndpointSlice' | 'Node', raw: unknown): string => {
  const r = validate(kind, raw);
  return r.ok ? 'ok' : r.reason;
};

describe('objects', () => {
  it.each([
    ['web', 'ok'],
    ['web-1', 'ok'],
    ['1web', /^metadata\.name: invalid value "1web": a DNS-1035 label must/],
    ['web.example', /^metadata\.name: invalid value "web.example": a DNS-1035 label/],
    ['evil\n-A INPUT -j DROP', /^metadata\.name: invalid value "evil\\n-A INPUT -j DROP": a DNS-1035 label/],
    ['x'.repeat(64), /^metadata\.name: invalid value "x{64}": must be no more than 63 characters$/],
  ])('Service name %j', (name, want) => {
    const got = reason('Service', service(name));
    if (typeof want === 'string') expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it('Service namespace: a DNS-1123 label', () => {
    expect(reason('Service', service('web', undefined, { namespace: 'kube-system' }))).toBe('ok');
    expect(reason('Service', service('web', undefined, { namespace: 'Demo' }))).toMatch(/^metadata\.namespace: invalid value "Demo": a DNS-1123 label/);
    expect(reason('Service', service('web', undefined, { namespace: 'a.b' }))).toMatch(/^metadata\.namespace: invalid value "a.b"/);
  });

  it.each([
    [[{ port: 80 }], 'ok'],
    [[{ name: '', port: 80 }], 'ok'],
    [[{ name: 'http', port: 80 }, { name: 'https', port: 443 }], 'ok'],
    [[{ name: 'http', port: 80 }, { port: 443 }], 'spec.ports[1].name: required when the Service has more than one port'],
    [[{ port: 80 }, { port: 443 }], 'spec.ports[0].name: required when the Service has more than one port; spec.ports[1].name: required when the Service has more than one port'],
    [[{ name: 'http', port: 80 }, { name: 'http', port: 443 }], 'spec.ports[1].name: duplicate value "http"'],
    [[{ name: 'HTTP', port: 80 }], /^spec\.ports\[0\]\.name: invalid value "HTTP": a DNS-1123 label/],
    [[{ name: 'http\n-j ACCEPT', port: 80 }], /^spec\.ports\[0\]\.name: invalid value "http\\n-j ACCEPT"/],
    [[{ name: 'http', port: 80, targetPort: 'web' }], 'ok'],
    [[{ name: 'http', port: 80, targetPort: 'Web Port' }], /^spec\.ports\[0\]\.targetPort: invalid value "Web Port"/],
    [[{ name: 'http', port: 80, targetPort: 0 }], 'spec.ports[0].targetPort: must be between 1 and 65535, got 0'],
    [[{ name: 'http', port: 80, targetPort: 70000 }], 'spec.ports[0].targetPort: must be between 1 and 65535, got 70000'],
  ])('Service ports %j', (ports, want) => {
    const got = reason('Service', service('web', ports));
    if (typeof want === 'string') expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it('labels and annotations: qualified keys, label values, 256 KiB of annotations', () => {
    expect(reason('Service', service('web', undefined, { labels: { 'app.kubernetes.io/name': 'web', team: '' } }))).toBe('ok');
    expect(reason('Service', service('web', undefined, { labels: { 'bad key': 'x' } }))).toMatch(/^metadata\.labels\["bad key"\]: invalid key "bad key"/);
    expect(reason('Service', service('web', undefined, { labels: { app: 'a b' } }))).toMatch(/^metadata\.labels\.app: invalid value "a b"/);
    expect(reason('Service', service('web', undefined, { annotations: { 'x/y/z': '1' } }))).toMatch(/^metadata\.annotations\.x\/y\/z: invalid key "x\/y\/z": a qualified name must have at most one/);
    expect(reason('Service', service('web', undefined, { annotations: { big: 'x'.repeat(256 * 1024) } }))).toMatch(/^metadata\.annotations: too long: 262147 bytes/);
    expect(reason('Service', service('web', undefined, { annotations: { big: 'é'.repeat(128 * 1024) } }))).toMatch(/^metadata\.annotations: too long: 262147 bytes/);
    // Annotation keys are checked lower-cased (as the API server does), label keys as they are.
    expect(reason('Service', service('web', undefined, { annotations: { 'Example.COM/Key': '1' } }))).toBe('ok');
    expect(reason('Service', service('web', undefined, { labels: { 'Example.COM/Key': '1' } }))).toMatch(/^metadata\.labels\.Example\.COM\/Key: invalid key "Example.COM\/Key": prefix part a DNS-1123 subdomain/);
  });

  it('drops the last-applied annotation from a valid object, keeps the others', () => {
    const r = validate('Service', service('web', undefined, { annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}', 'kube-ipvs-proxy.io/scheduler': 'lc' } }));
    expect(r.ok && r.value.metadata.annotations).toEqual({ 'kube-ipvs-proxy.io/scheduler': 'lc' });
  });

  it.each([
    ['web-abcde', 'ok'],
    ['web.v1-abcde', 'ok'],
    ['1-web', 'ok'],
    ['Web', /^metadata\.name: invalid value "Web": a DNS-1123 subdomain/],
    ['web\r\nx', /^metadata\.name: invalid value "web\\r\\nx": a DNS-1123 subdomain/],
  ])('EndpointSlice name %j', (name, want) => {
    const got = reason('EndpointSlice', slice(name));
    if (typeof want === 'string') expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it.each([
    [[{ name: 'http', port: 80 }, { name: '', port: 81 }], 'ok'],
    [[{ port: 80 }], 'ok'],
    [[{ port: 80 }, { port: 81 }], 'ports[1].name: duplicate value ""'],
    [[{ name: 'http', port: 80 }, { name: 'http', port: 81 }], 'ports[1].name: duplicate value "http"'],
    [[{ name: 'Http', port: 80 }], /^ports\[0\]\.name: invalid value "Http": a DNS-1123 label/],
  ])('EndpointSlice ports %j', (ports, want) => {
    const got = reason('EndpointSlice', slice('web-1', ports));
    if (typeof want === 'string') expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it('EndpointSlice endpoints: nodeName a subdomain, hostname a label', () => {
    expect(reason('EndpointSlice', slice('web-1', undefined, [{ addresses: ['10.0.0.1'], nodeName: 'node-1.example', hostname: 'pod-1' }]))).toBe('ok');
    expect(reason('EndpointSlice', slice('web-1', undefined, [{ addresses: ['10.0.0.1'], nodeName: 'Node 1' }]))).toMatch(/^endpoints\[0\]\.nodeName: invalid value "Node 1"/);
    expect(reason('EndpointSlice', slice('web-1', undefined, [{ addresses: ['10.0.0.1'], hostname: 'pod.1' }]))).toMatch(/^endpoints\[0\]\.hostname: invalid value "pod.1"/);
  });

  it('Node name: a DNS-1123 subdomain', () => {
    const node = (name: string): unknown => ({ apiVersion: 'v1', kind: 'Node', metadata: { name } });
    expect(reason('Node', node('kip-node'))).toBe('ok');
    expect(reason('Node', node('ip-10-0-0-1.ec2.internal'))).toBe('ok');
    expect(reason('Node', node('Kip_Node'))).toMatch(/^metadata\.name: invalid value "Kip_Node": a DNS-1123 subdomain/);
  });

  it('prefixes paths with the List item and cuts a huge value in the reason', () => {
    const r = validate('Service', service('x'.repeat(1_000_000)), ['items', 3]);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.reason).toMatch(/^items\[3\]\.metadata\.name: invalid value "x{100}…": must be no more than 63 characters$/);
      expect(r.reason.length).toBeLessThan(300);
    }
  });
});
