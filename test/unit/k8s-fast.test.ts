// model/k8s-fast.ts against the zod schemas it stands in for: whenever it decodes an object, zod
// must accept it and give the same result, key order included (the manifests source compares
// objects as JSON text); whatever it declines goes to zod. Random objects, mostly well-formed,
// with broken fields, extra fields and odd values mixed in.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { NOT_PLAIN, plainEndpointSlice, plainNode, plainService } from '../../src/model/k8s-fast.js';
import { endpointSliceSchema, nodeSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { validate } from '../../src/source/validate.js';
import { makeNode, makeService, makeSlice } from '../../bench/objects.mjs';

/** Values a broken field may hold (js-yaml gives Infinity, NaN and floats beyond 2^53 too). */
const junk = fc.oneof(
  fc.constant(null),
  fc.integer({ min: -5, max: 70_000 }),
  fc.double(),
  fc.constantFrom(Infinity, NaN, 2 ** 60, 1.5, 0, -1, 65535, 65536, ''),
  fc.string({ maxLength: 4 }),
  fc.boolean(),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }),
  fc.constant(JSON.parse('{"__proto__":"x"}')),
  fc.constant(Object.create(null)),
);
/**
 * Services and EndpointSlices: well-formed ones (`broken` false: every key present or not,
 * sometimes an unknown one), or with junk mixed into any field.
 */
function objects(broken: boolean) {
/** Mostly `valid`, sometimes junk. */
const mostly = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> => (broken ? fc.oneof({ weight: 60, arbitrary: valid as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: junk }) : valid);
/** A record whose keys are each present or not, plus sometimes an unknown key. */
function obj(model: Record<string, fc.Arbitrary<unknown>>, required: string[] = []): fc.Arbitrary<unknown> {
  const opts = { requiredKeys: required, noNullPrototype: true };
  const withExtra = fc.record({ ...model, extra: fc.anything({ maxDepth: 1 }) }, opts);
  return mostly(fc.oneof({ weight: 8, arbitrary: fc.record(model, opts) }, { weight: 1, arbitrary: withExtra }));
}

const port = mostly(fc.integer({ min: 1, max: 65535 }));
const protocol = mostly(fc.constantFrom('TCP', 'UDP', 'SCTP'));
const ip = mostly(fc.oneof(fc.ipV4(), fc.ipV6()));
const str = mostly(fc.string({ maxLength: 6 }));
const strings = mostly(fc.array(fc.string({ maxLength: 6 }), { maxLength: 3 }));
const dict = mostly(fc.dictionary(fc.string({ maxLength: 5 }).filter((k) => k !== '__proto__'), mostly(fc.string({ maxLength: 5 })), { maxKeys: 3, noNullPrototype: true }));
const names = mostly(fc.array(obj({ name: str, other: str }, ['name']), { maxLength: 2 }));
const metadata = obj({ name: mostly(fc.constantFrom('web', 'db', 'a-b')), namespace: mostly(fc.constantFrom('default', 'kube-system', 'ns1')), uid: str, resourceVersion: str, labels: dict, annotations: dict, managedFields: fc.anything({ maxDepth: 2 }) }, ['name']);

const service = obj(
  {
    apiVersion: mostly(fc.constant('v1')),
    kind: mostly(fc.constant('Service')),
    metadata,
    spec: obj({
      type: mostly(fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName')),
      clusterIP: str,
      clusterIPs: strings,
      ipFamilies: mostly(fc.array(mostly(fc.constantFrom('IPv4', 'IPv6')), { maxLength: 2 })),
      ports: mostly(fc.array(obj({ name: str, protocol, port, targetPort: mostly(fc.oneof(fc.integer({ min: 0, max: 70_000 }), fc.string({ maxLength: 4 }))), nodePort: port, appProtocol: str }, ['port']), { maxLength: 3 })),
      externalIPs: mostly(fc.array(ip, { maxLength: 2 })),
      loadBalancerSourceRanges: strings,
      externalTrafficPolicy: mostly(fc.constantFrom('Cluster', 'Local')),
      internalTrafficPolicy: mostly(fc.constantFrom('Cluster', 'Local')),
      healthCheckNodePort: port,
      sessionAffinity: mostly(fc.constantFrom('None', 'ClientIP')),
      sessionAffinityConfig: obj({ clientIP: obj({ timeoutSeconds: mostly(fc.integer({ min: 1, max: 86400 })) }) }),
      externalName: str,
      trafficDistribution: str,
    }),
    status: obj({ loadBalancer: obj({ ingress: mostly(fc.array(obj({ ip, hostname: str, ipMode: str }), { maxLength: 2 })) }) }),
  },
  ['metadata', 'spec'],
);

const slice = obj(
  {
    apiVersion: mostly(fc.constant('discovery.k8s.io/v1')),
    kind: mostly(fc.constant('EndpointSlice')),
    metadata,
    addressType: mostly(fc.constantFrom('IPv4', 'IPv6', 'FQDN')),
    endpoints: mostly(
      fc.array(
        obj(
          {
            addresses: mostly(fc.array(fc.ipV4(), { minLength: 1, maxLength: 2 })),
            conditions: obj({ ready: mostly(fc.boolean()), serving: mostly(fc.boolean()), terminating: mostly(fc.boolean()) }),
            nodeName: str,
            zone: str,
            hostname: str,
            hints: obj({ forZones: names, forNodes: names }),
            targetRef: fc.anything({ maxDepth: 1 }),
          },
          ['addresses'],
        ),
        { maxLength: 3 },
      ),
    ),
    ports: mostly(fc.array(obj({ name: str, protocol, port }), { maxLength: 2 })),
  },
  ['metadata', 'addressType'],
);

const node = obj(
  {
    apiVersion: mostly(fc.constant('v1')),
    kind: mostly(fc.constant('Node')),
    metadata: obj({ name: mostly(fc.constantFrom('node-1', 'n')), namespace: mostly(fc.constantFrom('', 'x')), uid: str, resourceVersion: str, labels: dict, annotations: dict, deletionTimestamp: str, managedFields: fc.anything({ maxDepth: 2 }) }, ['name']),
    spec: obj({ podCIDR: str, podCIDRs: strings, providerID: str, taints: mostly(fc.array(obj({ key: str, value: str, effect: str, timeAdded: str }, ['key']), { maxLength: 2 })) }),
    status: obj({
      addresses: mostly(fc.array(obj({ type: mostly(fc.constantFrom('InternalIP', 'ExternalIP', 'Hostname')), address: str }, ['type', 'address']), { maxLength: 3 })),
      capacity: dict,
      conditions: fc.anything({ maxDepth: 2 }),
    }),
  },
  ['metadata'],
);
return { service, slice, node };
}

/** k8s-fast's result equals zod's wherever it gives one; returns whether it did. */
function same(fast: unknown, schema: typeof serviceSchema | typeof endpointSliceSchema | typeof nodeSchema, raw: unknown): boolean {
  const z = schema.safeParse(raw);
  if (fast === NOT_PLAIN) return false;
  expect(z.success, JSON.stringify(z.error?.issues)).toBe(true);
  expect(JSON.stringify(fast)).toBe(JSON.stringify(z.data));
  expect(fast).toStrictEqual(z.data);
  return true;
}

describe('k8s-fast: the plain form decodes as the zod schemas do', () => {
  const good = objects(false);
  const broken = objects(true);

  it('decodes every well-formed Service, EndpointSlice and Node, as zod does', () => {
    fc.assert(fc.property(good.service, good.slice, good.node, (s, e, n) => {
      expect(same(plainService(s), serviceSchema, s)).toBe(true);
      expect(same(plainEndpointSlice(e), endpointSliceSchema, e)).toBe(true);
      expect(same(plainNode(n), nodeSchema, n)).toBe(true);
    }), { numRuns: 2000 });
  });

  it('with broken fields: the same result whenever it decodes one (zod judges the rest)', () => {
    let [decoded, declined] = [0, 0];
    fc.assert(fc.property(broken.service, broken.slice, broken.node, (s, e, n) => {
      for (const d of [same(plainService(s), serviceSchema, s), same(plainEndpointSlice(e), endpointSliceSchema, e), same(plainNode(n), nodeSchema, n)]) d ? decoded++ : declined++;
    }), { numRuns: 4000 });
    expect(Math.min(decoded, declined)).toBeGreaterThan(200);
  });

  it('the same after a JSON round trip (what the API source parses)', () => {
    fc.assert(fc.property(broken.service, broken.slice, broken.node, (s, e, n) => {
      const [rs, re, rn] = [JSON.parse(JSON.stringify(s ?? null)), JSON.parse(JSON.stringify(e ?? null)), JSON.parse(JSON.stringify(n ?? null))];
      same(plainService(rs), serviceSchema, rs);
      same(plainEndpointSlice(re), endpointSliceSchema, re);
      same(plainNode(rn), nodeSchema, rn);
    }), { numRuns: 1000 });
  });

  it('decodes the benchmark\'s realistic objects (managedFields, targetRefs, status) without zod', () => {
    const n = JSON.parse(JSON.stringify(makeNode()));
    expect(same(plainNode(n), nodeSchema, n)).toBe(true);
    for (let i = 0; i < 50; i++) {
      const s = JSON.parse(JSON.stringify(makeService(i)));
      const e = JSON.parse(JSON.stringify(makeSlice(i, 10)));
      expect(same(plainService(s), serviceSchema, s)).toBe(true);
      expect(same(plainEndpointSlice(e), endpointSliceSchema, e)).toBe(true);
    }
  });

  it('declines what zod must judge, and validate() still reports zod\'s reasons', () => {
    const base = JSON.parse(JSON.stringify(makeService(1)));
    const broken = { ...base, spec: { ...base.spec, ports: [{ port: '80' }] } };
    expect(plainService(broken)).toBe(NOT_PLAIN);
    expect(validate('Service', broken)).toEqual({ ok: false, reason: 'spec.ports[0].port: expected number, received string' });
    const proto = JSON.parse('{"metadata":{"name":"a","labels":{"__proto__":"x"}},"spec":{}}');
    expect(plainService(proto)).toBe(NOT_PLAIN);
    expect(plainService(Object.assign(Object.create(null), base))).toBe(NOT_PLAIN);
    expect(plainEndpointSlice({ ...JSON.parse(JSON.stringify(makeSlice(1, 2))), addressType: undefined })).toBe(NOT_PLAIN);
  });
});
