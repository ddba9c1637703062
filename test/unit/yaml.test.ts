// yaml.ts: config files and kubeconfigs read as js-yaml reads them, without loading js-yaml for
// the JSON (kubeconfigs) and block YAML that tools write; a YAML error names line and column.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { CORE_SCHEMA, DEFAULT_SCHEMA, load } from 'js-yaml';
import { describe, expect, it } from 'vitest';

import { loadYaml, yamlReason } from '../../src/yaml.js';
import { ROOT } from '../chart/helm.js';

const TEXTS = [
  '{"apiVersion": "v1", "kind": "Config", "n": [1, 2.5, null, true], "s": "a: b"}\n', // JSON
  '  [1, "x"]', // JSON after white space
  'apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://10.0.0.1:6443\n', // block
  '---\nmode: ipvs\nipvs:\n  scheduler: rr\n  syncPeriod: 30s\n  excludeCIDRs: []\nbindAddress: 0.0.0.0\n',
  '{mode: ipvs, ipvs: {scheduler: rr}}\n', // flow YAML, not JSON
  'a: |\n  two\n  lines\nb: &x 1\nc: *x\n', // block scalar, anchor: js-yaml
  'a: 0x1F\nb: .inf\nc: ~\nd: 1e3\ne: "q"\nf: \'s\'\n',
  '# only a comment\n',
  '',
];

describe('loadYaml', () => {
  it('reads JSON, block YAML and everything else as js-yaml does', () => {
    for (const text of TEXTS) {
      expect(loadYaml(text, 'f.yaml'), JSON.stringify(text)).toEqual(load(text, { schema: CORE_SCHEMA }));
      expect(loadYaml(text, 'f.yaml', { json: true }), JSON.stringify(text)).toEqual(load(text, { schema: CORE_SCHEMA }));
      expect(loadYaml(text, 'f.yaml', { schema: 'default', json: true }), JSON.stringify(text)).toEqual(load(text, { schema: DEFAULT_SCHEMA }));
    }
  });

  it("uses js-yaml's default schema when asked (a timestamp in flow syntax is a Date), its core schema otherwise", () => {
    expect(loadYaml('{at: 2026-11-20}', 'k')).toEqual({ at: '2026-11-20' });
    expect(loadYaml('{at: 2026-11-20}', 'k', { schema: 'default' })).toEqual({ at: new Date('2026-11-20') });
  });

  it('names line and column of a YAML error', () => {
    for (const [text, reason] of [
      ['mode: ipvs\nmode: iptables\n', /^duplicated mapping key at line 2, column 1$/],
      ['a: [1, 2\n', /at line \d+, column \d+$/],
      ['{"a": 1\n', /at line \d+, column \d+$/], // broken JSON: js-yaml's error
    ] as const) {
      let err: unknown;
      try {
        loadYaml(text, 'cfg.yaml');
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(Error);
      expect((err as Error).message).toContain('cfg.yaml');
      expect(yamlReason(err), text).toMatch(reason);
    }
    expect(yamlReason(new Error('not YAML'))).toBe('not YAML');
  });

  it('refuses a duplicated key in JSON unless JSON.parse is asked for (kube-proxy decodes its config strictly)', () => {
    const text = '{"mode": "ipvs", "mode": "iptables"}';
    expect(() => loadYaml(text, 'cfg.json')).toThrow(/duplicated mapping key/);
    expect(loadYaml(text, 'kubeconfig', { json: true })).toEqual({ mode: 'iptables' });
  });

  it('loads js-yaml only for a text the block reader declines (the built module, in a fresh process)', () => {
    const loads = (text: string): boolean => {
      const code = `import { createRequire } from 'node:module';
        const { loadYaml } = await import(${JSON.stringify(join(ROOT, 'dist/src/yaml.js'))});
        loadYaml(${JSON.stringify(text)}, 'f', { json: true });
        const cache = createRequire(import.meta.url).cache;
        process.stdout.write(String(Object.keys(cache).some((k) => k.includes('/node_modules/js-yaml/'))));`;
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 20_000 });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout === 'true';
    };
    expect(loads(TEXTS[0]!)).toBe(false);
    expect(loads(TEXTS[2]!)).toBe(false);
    expect(loads(TEXTS[3]!)).toBe(false);
    expect(loads(TEXTS[4]!)).toBe(true);
  });
});
