// End to end on the host kernel in a fresh network namespace: the built daemon (iptables mode) on a
// manifests directory holding, beside good files, an alias bomb, a symlink loop, a directory under
// a manifest name, a Service whose name carries an iptables rule and one whose port is a string
// (judged by the zod schemas, which the built daemon loads only then). Start-up succeeds, the good
// Services are programmed (iptables-save), the bad ones are not, each bad file is logged once by
// name, and a later edit of a good file is applied while the bad files stay.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, Manifests, waitFor } from '../lib/daemon.js';

const sh = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8' });
const nat = (): string => sh('iptables-nft-save', '-t', 'nat');
const ARGS = ['--proxy-mode', 'iptables', '--hostname-override', 'kip-node', '--log-format', 'json', '--iptables-min-sync-period', '100ms', '--iptables-sync-period', '5s'];

function service(name: string, ip: string): string {
  return `apiVersion: v1
kind: Service
metadata: {name: ${JSON.stringify(name)}, namespace: iso}
spec: {clusterIP: ${ip}, ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${name.replace(/[^a-z0-9-]/g, 'x')}-1, namespace: iso, labels: {kubernetes.io/service-name: ${JSON.stringify(name)}}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.244.1.2], conditions: {ready: true}}]
`;
}

function aliasBomb(): string {
  let text = 'kind: Service\nmetadata: {name: bomb, namespace: iso}\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n';
  for (let i = 1; i < 9; i++) text += `${'abcdefghi'[i]}: &${'abcdefghi'[i]} [${Array(9).fill(`*${'abcdefghi'[i - 1]}`).join(',')}]\n`;
  return text;
}

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  sh('iptables-nft', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT'); // as kubelet does: the node uses nft
  const empty = mkdtempSync(join(tmpdir(), 'kip-empty-'));
  manifests = new Manifests(empty);
  rmSync(empty, { recursive: true });
  manifests.write('a-good.yaml', service('good', '10.96.7.1'));
  manifests.write('b-bomb.yaml', aliasBomb());
  manifests.write('c-evil.yaml', service('evil\n-A INPUT -j DROP', '10.96.7.66'));
  symlinkSync('d-loop.yaml', join(manifests.dir, 'd-loop.yaml'));
  mkdirSync(join(manifests.dir, 'e-dir.yaml'));
  manifests.write('f-port.yaml', service('port', '10.96.7.67').replace('port: 80}', 'port: eighty}'));
  manifests.write('z-good.yaml', service('other', '10.96.7.2'));
  d = new Daemon(['--manifests', manifests.dir, ...ARGS]);
  d.start();
  await d.healthy();
}, 60_000);

afterAll(async () => {
  await d?.stop();
  execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; iptables-nft -t mangle -X KUBE-IPTABLES-HINT; true`]);
  manifests?.remove();
});

const rejected = (): Array<{ object: string; reason: string }> =>
  d.log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; object: string; reason: string }).filter((l) => l.msg === 'rejected object');

describe('one bad manifest file fails alone', () => {
  it('starts, programs the good Services, not the bad ones, and names each bad file once', () => {
    const rules = nat();
    expect(rules).toContain('-d 10.96.7.1/32');
    expect(rules).toContain('-d 10.96.7.2/32');
    expect(rules).not.toContain('10.96.7.66');
    expect(sh('iptables-nft-save', '-t', 'filter')).not.toMatch(/^-A INPUT -j DROP/m);
    const f = (n: string): string => join(manifests.dir, n);
    const byObject = rejected().map((e) => e.object.split('#')[0]!.split(' ')[0]).sort();
    expect(byObject).toEqual([f('b-bomb.yaml'), f('c-evil.yaml'), f('c-evil.yaml'), f('d-loop.yaml'), f('e-dir.yaml'), f('f-port.yaml')]);
    expect(rejected().find((e) => e.object.startsWith(f('c-evil.yaml')) && e.reason.startsWith('metadata.name'))?.reason).toMatch(/^metadata\.name: invalid value "evil\\n-A INPUT -j DROP": a DNS-1035 label/);
    expect(rejected().find((e) => e.object.startsWith(f('f-port.yaml')))?.reason).toBe('spec.ports[0].port: expected number, received string');
    // One line for it in the whole log (not the source's warning and the proxy's error both).
    expect(d.log.split('\n').filter((l) => l.includes(f('f-port.yaml')))).toHaveLength(1);
    expect(rules).not.toContain('10.96.7.67');
  });

  it('applies a later edit of a good file; the bad files are not reported again', async () => {
    const before = rejected().length;
    manifests.write('a-good.yaml', service('good', '10.96.7.11'));
    await waitFor('the edited Service in iptables', () => nat().includes('-d 10.96.7.11/32'));
    expect(nat()).not.toContain('-d 10.96.7.1/32');
    expect(rejected()).toHaveLength(before);
  });
});
