// values.schema.json: bad values fail at install time. Helm validates the coalesced values
// (values.yaml + the user's) against the chart's JSON Schema (draft-07); checked here with
// ajv, and with gojsonschema (Helm 3's own validator) through the Go renderer, which must
// agree and print Helm's message.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { PROXY_MODES, SCHEDULERS } from '../../src/config.js';
import { buildRenderer, CHART_DIR, render } from '../chart/helm.js';

const schema = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8'));
const defaults = parseYaml(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8'));

/** chartutil.CoalesceValues for one chart: user values win, maps merge, null deletes a default. */
function coalesce(user: Record<string, unknown>, dflt: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...user };
  for (const [k, d] of Object.entries(dflt)) {
    if (!(k in out)) out[k] = d;
    else if (out[k] === null) delete out[k];
    else if (isMap(out[k]) && isMap(d)) out[k] = coalesce(out[k] as Record<string, unknown>, d as Record<string, unknown>);
  }
  return out;
}
const isMap = (v: unknown): boolean => v !== null && typeof v === 'object' && !Array.isArray(v);

// strict: an unknown keyword or a sloppy schema is an error, not a silent no-op.
const ajv = new Ajv({ allErrors: true, strict: true });
const validate = ajv.compile(schema);

function ajvErrors(values: object): ErrorObject[] {
  return validate(coalesce(values as Record<string, unknown>, defaults)) ? [] : [...(validate.errors ?? [])];
}

/** Values that must be refused, with the path the error must name (ajv's instancePath and Helm's field). */
const BAD: Array<[string, object, string]> = [
  ['an unknown scheduler', { ipvs: { scheduler: 'round-robin' } }, 'ipvs.scheduler'],
  ['an unknown mode', { mode: 'nftables' }, 'mode'],
  ['a negative sync period', { syncPeriod: '-30s' }, 'syncPeriod'],
  ['a sync period without a unit', { syncPeriod: '30' }, 'syncPeriod'],
  ['a sync period as a number', { syncPeriod: 30 }, 'syncPeriod'],
  ['a negative minimum sync period', { minSyncPeriod: '-1s' }, 'minSyncPeriod'],
  ['a bad duration unit', { ipvs: { tcpTimeout: '15 minutes' } }, 'ipvs.tcpTimeout'],
  ['a negative IPVS timeout', { ipvs: { udpTimeout: '-5s' } }, 'ipvs.udpTimeout'],
  ['a negative masquerade bit', { masqueradeBit: -1 }, 'masqueradeBit'],
  ['a masquerade bit above 31', { masqueradeBit: 32 }, 'masqueradeBit'],
  ['a fractional masquerade bit', { masqueradeBit: 1.5 }, 'masqueradeBit'],
  ['health port 0', { healthz: { port: 0 } }, 'healthz.port'],
  ['a health port above 65535', { healthz: { port: 70000 } }, 'healthz.port'],
  ['a negative metrics port', { metrics: { port: -1 } }, 'metrics.port'],
  ['a health bind address that is not an IP', { healthz: { bindAddress: 'localhost:10256' } }, 'healthz.bindAddress'],
  ['maxUnavailable 0', { updateStrategy: { maxUnavailable: 0 } }, 'updateStrategy.maxUnavailable'],
  ['maxUnavailable 0%', { updateStrategy: { maxUnavailable: '0%' } }, 'updateStrategy.maxUnavailable'],
  ['a negative verbosity', { logging: { verbosity: -1 } }, 'logging.verbosity'],
  ['an unknown log format', { logging: { format: 'xml' } }, 'logging.format'],
  ['an exclude CIDR without a prefix length', { ipvs: { excludeCIDRs: ['10.0.0.0'] } }, 'ipvs.excludeCIDRs'],
  ['a cluster CIDR that is not one', { clusterCIDR: '10.244.0.0/33' }, 'clusterCIDR'],
  ['a bad NodePort address', { nodePortAddresses: ['eth0'] }, 'nodePortAddresses'],
  ['a misspelt top-level value', { schedular: 'wrr' }, 'schedular'],
  ['a misspelt nested value', { ipvs: { strictArp: true } }, 'strictArp'],
  ['an unknown pull policy', { image: { pullPolicy: 'Sometimes' } }, 'image.pullPolicy'],
  ['an extra arg that is not a flag', { extraArgs: ['ipvs-scheduler=wrr'] }, 'extraArgs'],
  ['a non-boolean privileged', { privileged: 'yes' }, 'privileged'],
  ['a zero probe period', { livenessProbe: { periodSeconds: 0 } }, 'livenessProbe.periodSeconds'],
  ['a negative grace period', { terminationGracePeriodSeconds: -1 }, 'terminationGracePeriodSeconds'],
  ['a numeric pod annotation', { podAnnotations: { replicas: 3 } }, 'podAnnotations'],
  ['a scrape interval without a unit', { serviceMonitor: { enabled: true, interval: '30' } }, 'serviceMonitor.interval'],
  ['a capability with CAP_ and lower case', { extraCapabilities: ['cap_sys_admin'] }, 'extraCapabilities'],
];

/** Values that must pass (beyond the chart tests' value sets). */
const GOOD: Array<[string, object]> = [
  ['the defaults', {}],
  ['every scheduler', {}],
  ['durations in every Go form', { syncPeriod: '1m30s', minSyncPeriod: '500ms', ipvs: { tcpTimeout: '1.5h', tcpFinTimeout: '0', udpTimeout: '300\u00b5s' } }],
  ['0s sync period (the default)', { syncPeriod: '0s' }],
  ['IPv6 everywhere', { healthz: { bindAddress: '::' }, metrics: { bindAddress: 'fd00::1' }, clusterCIDR: 'fd00:10:244::/56', ipvs: { excludeCIDRs: ['fd00::/8', '::/0'] } }],
  ['nodePortAddresses primary', { nodePortAddresses: ['primary'] }],
  ['a percentage maxUnavailable', { updateStrategy: { maxUnavailable: '25%' } }],
  ['global values from a parent chart', { global: { imageRegistry: 'x' } }],
  ['null removes a default', { affinity: null, tolerations: null }],
];

let renderer: string;
beforeAll(() => {
  renderer = buildRenderer();
}, 180_000);

describe('values.schema.json', () => {
  it('compiles as draft-07 under ajv strict mode', () => {
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(typeof validate).toBe('function');
  });

  it('enumerates exactly the daemon\'s schedulers and modes', () => {
    expect(schema.properties.ipvs.properties.scheduler.enum).toEqual([...SCHEDULERS]);
    expect(schema.properties.mode.enum).toEqual([...PROXY_MODES]);
  });

  it('accepts every scheduler', () => {
    for (const s of SCHEDULERS) expect(ajvErrors({ ipvs: { scheduler: s } }), s).toEqual([]);
  });

  it.each(GOOD)('accepts %s (ajv and Helm\'s validator)', (_name, values) => {
    expect(ajvErrors(values)).toEqual([]);
    const r = render(renderer, [values]);
    expect(r.stderr).toBe('');
    expect(r.ok).toBe(true);
  });

  it.each(BAD)('refuses %s (ajv and Helm\'s validator), naming the field', (_name, values, field) => {
    const errors = ajvErrors(values);
    expect(errors.length).toBeGreaterThan(0);
    const named = errors.map((e) => `${e.instancePath.slice(1).replaceAll('/', '.')} ${JSON.stringify(e.params)}`).join('\n');
    expect(named).toContain(field.split('.').at(-1));
    const r = render(renderer, [values]);
    expect(r.ok).toBe(false);
    expect(r.stderr).toMatch(/^Error: values don't meet the specifications of the schema\(s\) in the following chart\(s\):\nkube-ipvs-proxy:\n- /);
    expect(r.stderr).toContain(field.split('.').at(-1));
  });

  it('prints a clear message for a wrong scheduler, as helm install would', () => {
    const r = render(renderer, [{ ipvs: { scheduler: 'round-robin' } }]);
    expect(r.stderr).toContain("- at '/ipvs/scheduler': value must be one of 'rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf', 'twos'");
  });
});
