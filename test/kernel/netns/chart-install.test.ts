// The chart against a real kube-apiserver: `helm install` of every value set the chart tests use
// (server-side validation of every object; the ServiceMonitor CRD installed for the set that
// enables it), NOTES.txt as Helm prints it, `helm upgrade` with changed values, and
// `helm uninstall` leaving nothing behind.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ControlPlane, startControlPlane } from '../../harness/control-plane.mjs';
// @ts-expect-error: a plain ES module of the test harness, without types
import { moduleFile } from '../../tools/build.mjs';
import { VALUE_SETS } from '../../chart/value-sets.js';
import { CHART } from '../lib/cluster.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

let cp: ControlPlane;
const scratch = mkdtempSync(join(tmpdir(), 'kip-chart-install-'));

beforeAll(async () => {
  cp = await startControlPlane({ port: 16443, etcdPort: 12379 });
  cp.kubectl(['apply', '--server-side', '-f', moduleFile('serviceMonitorCrd')]);
  cp.kubectl(['wait', '--for=condition=Established', 'crd/servicemonitors.monitoring.coreos.com', '--timeout=60s']);
  await cp.api.ensureNamespace('monitoring');
}, 180_000);

afterAll(async () => {
  await cp?.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 60_000);

/** The objects a release owns, as `kind/namespace/name`, read back from the server. */
function releaseObjects(release: string): string[] {
  const out = cp.kubectl(['get', 'serviceaccounts,configmaps,daemonsets,services,clusterroles,clusterrolebindings,servicemonitors', '-A', '-l', `app.kubernetes.io/instance=${release}`, '-o', 'jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}{"\\n"}{end}']);
  const secrets = cp.kubectl(['get', 'secrets', '-A', '-l', `owner=helm,name=${release}`, '-o', 'name']);
  return [...out.split('\n'), ...secrets.split('\n')].filter(Boolean).sort();
}

describe('helm install into a real API server', () => {
  it('installs every value set (server-side validation), then uninstalls it leaving nothing', () => {
    let i = 0;
    for (const [name, values] of Object.entries(VALUE_SETS)) {
      const release = `kip${i++}`;
      const file = valuesFile(release, values);
      try {
        cp.helm(['install', release, CHART, '--namespace', 'kube-system', '-f', file]);
      } catch (e) {
        throw new Error(`helm install of value set "${name}" failed: ${(e as { stderr?: string }).stderr ?? e}`);
      }
      expect(releaseObjects(release).some((o) => o.startsWith('DaemonSet/')), name).toBe(true);
      cp.helm(['uninstall', release, '--namespace', 'kube-system', '--wait']);
      expect(releaseObjects(release), name).toEqual([]);
    }
  });

  it('prints NOTES.txt: how to park kube-proxy, check the rollout and health, and uninstall', () => {
    cp.kubectl(['create', 'namespace', 'net']);
    cp.helm(['install', 'kip', CHART, '--namespace', 'net']);
    const notes = cp.helm(['get', 'notes', 'kip', '--namespace', 'net']);
    expect(notes).toContain(`kubectl -n kube-system patch ds kube-proxy -p '{"spec":{"template":{"spec":{"nodeSelector":{"non-existing":"true"}}}}}'`);
    expect(notes).toContain('kube-proxy --cleanup');
    expect(notes).toContain('kubectl -n net rollout status ds/kip-kube-ipvs-proxy');
    expect(notes).toContain(':10256/healthz');
    expect(notes).toContain(':10256/livez');
    expect(notes).toContain('kube-ipvs-proxy inspect');
    expect(notes).toContain('kube-ipvs-proxy cleanup');
    expect(notes).toContain('WARNING: apiServer.host is empty');
    expect(notes).toContain('kubectl describe service');
    expect(notes).not.toContain('<no value>');
  });

  it('helm upgrade with changed values rolls the config into the DaemonSet; NOTES follow the values', () => {
    const before = JSON.parse(cp.kubectl(['get', 'ds', '-n', 'net', 'kip-kube-ipvs-proxy', '-o', 'json']));
    const file = valuesFile('upgrade', { apiServer: { host: '10.0.0.1' }, ipvs: { scheduler: 'wrr' }, serviceMonitor: { enabled: true } });
    cp.helm(['upgrade', 'kip', CHART, '--namespace', 'net', '-f', file]);
    const after = JSON.parse(cp.kubectl(['get', 'ds', '-n', 'net', 'kip-kube-ipvs-proxy', '-o', 'json']));
    const sum = (ds: any) => ds.spec.template.metadata.annotations['checksum/config'];
    expect(sum(after)).not.toBe(sum(before));
    expect(after.spec.template.spec.containers[0].env).toContainEqual({ name: 'KUBERNETES_SERVICE_HOST', value: '10.0.0.1' });
    const cm = JSON.parse(cp.kubectl(['get', 'cm', '-n', 'net', 'kip-kube-ipvs-proxy', '-o', 'json']));
    expect(cm.data['config.conf']).toContain('scheduler: "wrr"');
    const notes = cp.helm(['get', 'notes', 'kip', '--namespace', 'net']);
    expect(notes).not.toContain('WARNING');
    expect(notes).toContain('ServiceMonitor net/kip-kube-ipvs-proxy');
    expect(notes).toContain('0.0.0.0:10249');
    cp.helm(['uninstall', 'kip', '--namespace', 'net', '--wait']);
    expect(releaseObjects('kip')).toEqual([]);
  });
});

/** Writes a values file (JSON is YAML) in this file's scratch directory; returns its path. */
function valuesFile(name: string, values: object): string {
  const file = join(scratch, `${name}.json`);
  writeFileSync(file, JSON.stringify(values));
  return file;
}
