// test/chart/render.go, the `helm template` stand-in, behaves as Helm 3 does on the features
// charts use: a small fixture chart exercises each built-in and each rule, with the output
// Helm gives (see pkg/engine, pkg/chartutil and pkg/releaseutil in helm/helm v3).

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer, parseManifests, render } from '../chart/helm.js';

let renderer: string;
let dir: string;
let n = 0;

beforeAll(() => {
  renderer = buildRenderer();
  dir = mkdtempSync(join(tmpdir(), 'kip-render-'));
}, 180_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Writes a chart from {path: content}; Chart.yaml gets a default. */
function chart(files: Record<string, string>): string {
  const root = join(dir, `c${n++}`);
  const all = { 'Chart.yaml': 'apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: "4.5"\n', ...files };
  for (const [p, text] of Object.entries(all)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return root;
}

function ok(root: string, values: object[] = [], opts = {}): string {
  const r = render(renderer, values, { name: 'rel', namespace: 'ns', ...opts }, root);
  expect(r.stderr).toBe('');
  expect(r.ok).toBe(true);
  return r.stdout;
}

function fails(root: string, values: object[] = []): string {
  const r = render(renderer, values, { name: 'rel', namespace: 'ns' }, root);
  expect(r.ok).toBe(false);
  return r.stderr;
}

describe('render.go (helm template stand-in)', () => {
  it('prints each document as `helm template` does, sorted in install order, partials and blank files skipped', () => {
    const root = chart({
      'templates/a-ds.yaml': 'apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\n',
      'templates/b-multi.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---   \n\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: s\n',
      'templates/c-empty.yaml': '{{- if false }}\nkind: Secret\n{{- end }}\n',
      'templates/_helpers.tpl': '{{- define "x" }}kind: Never{{ end }}',
    });
    expect(ok(root)).toBe([
      '---\n# Source: demo/templates/b-multi.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: s\n',
      '---\n# Source: demo/templates/b-multi.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n',
      '---\n# Source: demo/templates/a-ds.yaml\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\n',
    ].join(''));
  });

  it('provides .Release, .Chart, .Template, .Capabilities', () => {
    const root = chart({
      'templates/t.yaml': [
        'kind: T',
        'r: {{ .Release.Name }}/{{ .Release.Namespace }}/{{ .Release.Service }}/{{ .Release.IsInstall }}/{{ .Release.IsUpgrade }}/{{ .Release.Revision }}',
        'c: {{ .Chart.Name }}/{{ .Chart.Version }}/{{ .Chart.AppVersion }}/{{ .Chart.APIVersion }}',
        't: {{ .Template.Name }} {{ .Template.BasePath }}',
        'k: {{ .Capabilities.KubeVersion.Version }} {{ .Capabilities.KubeVersion.Major }} {{ .Capabilities.KubeVersion.Minor }}',
        'a: {{ .Capabilities.APIVersions.Has "apps/v1" }} {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}',
      ].join('\n'),
    });
    const [m] = parseManifests(ok(root, [], { apiVersions: [] }));
    expect(m!.obj).toEqual({
      kind: 'T', r: 'rel/ns/Helm/true/false/1', c: 'demo/1.2.3/4.5/v2',
      t: 'demo/templates/t.yaml demo/templates', k: 'v1.31.0 1 31', a: 'true false',
    });
    expect(parseManifests(ok(root, [], { apiVersions: ['monitoring.coreos.com/v1'] }))[0]!.obj.a).toBe('true true');
  });

  it('coalesces values as Helm: maps merge, later -f files win, null deletes a default, numbers are float64', () => {
    const root = chart({
      'values.yaml': 'a:\n  p: 1\n  q: 2\nb: keep\nc: drop\nbig: 1000000\nport: 10256\nlist: [1, 2]\n',
      'templates/t.yaml': 'kind: T\nv: {{ toJson .Values }}\nbig: "{{ .Values.big }}"\nport: "{{ .Values.port }}"\n',
    });
    const [m] = parseManifests(ok(root, [{ a: { q: 3, r: 4 }, c: null, list: [9] }, { a: { r: 5 } }]));
    expect(m!.obj.v).toEqual({ a: { p: 1, q: 3, r: 5 }, b: 'keep', big: 1e6, port: 10256, list: [9] });
    expect(m!.obj.big).toBe('1e+06'); // Helm's well-known float64 printing
    expect(m!.obj.port).toBe('10256');
  });

  it('include + nindent, tpl, toYaml (sorted keys), fromYaml, default, lookup (empty), <no value> blanked', () => {
    const root = chart({
      'values.yaml': 'labels:\n  z: "1"\n  a: b\nmsg: "{{ .Release.Name }}-x"\n',
      'templates/_h.tpl': '{{- define "lbl" -}}\nname: {{ .Release.Name }}\n{{ toYaml .Values.labels }}\n{{- end -}}',
      'templates/t.yaml': [
        'kind: T',
        'labels:',
        '  {{- include "lbl" . | nindent 2 }}',
        'tpl: {{ tpl .Values.msg . }}',
        'from: {{ (fromYaml "k: v").k }}',
        'bad: {{ (fromYaml ":\\n- x").Error | empty | not }}',
        'dflt: {{ .Values.nothing | default "d" }}',
        'lookup: {{ lookup "v1" "Secret" "ns" "s" | len }}',
        'missing: "{{ .Values.nothing }}"',
      ].join('\n'),
    });
    const out = ok(root);
    expect(out).toContain('labels:\n  name: rel\n  a: b\n  z: "1"\n');
    expect(parseManifests(out)[0]!.obj).toMatchObject({ tpl: 'rel-x', from: 'v', bad: true, dflt: 'd', lookup: 0, missing: '' });
  });

  it('required and fail stop the render with Helm\'s "execution error at (file:line:col): message"', () => {
    const root = chart({ 'templates/t.yaml': 'kind: T\nx: {{ required "x is required" .Values.x }}\n{{ if .Values.boom }}{{ fail "boom!" }}{{ end }}\n' });
    expect(fails(root)).toBe('Error: execution error at (demo/templates/t.yaml:2:6): x is required\n');
    expect(fails(root, [{ x: '' }])).toContain('x is required');
    expect(fails(root, [{ x: 1, boom: true }])).toMatch(/^Error: execution error at \(demo\/templates\/t\.yaml:3:\d+\): boom!\n$/);
    expect(ok(root, [{ x: 1 }])).toContain('x: 1');
  });

  it('has no env/expandenv (Helm removes them from sprig), and reports parse errors with the file', () => {
    expect(fails(chart({ 'templates/t.yaml': 'kind: T\nh: {{ env "HOME" }}\n' }))).toMatch(/^Error: parse error at \(demo\/templates\/t\.yaml:2\): function "env" not defined/);
  });

  it('refuses output that is not YAML, naming the template', () => {
    expect(fails(chart({ 'templates/t.yaml': 'kind: T\n  bad: [\n' }))).toMatch(/^Error: YAML parse error on demo\/templates\/t\.yaml/);
  });

  it('validates the coalesced values against values.schema.json before rendering, in Helm\'s words', () => {
    const root = chart({
      'values.yaml': 'count: 1\n',
      'values.schema.json': JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { count: { type: 'integer', minimum: 0 } }, required: ['count'] }),
      'templates/t.yaml': 'kind: T\n',
    });
    expect(ok(root, [{ count: 5 }])).toContain('kind: T');
    expect(fails(root, [{ count: -1 }])).toBe("Error: values don't meet the specifications of the schema(s) in the following chart(s):\ndemo:\n- count: Must be greater than or equal to 0\n\n");
    expect(fails(root, [{ count: null }])).toContain('- (root): count is required'); // null deleted the default
  });

  it('renders NOTES.txt only with --notes, never among the manifests', () => {
    const root = chart({ 'templates/NOTES.txt': 'Installed {{ .Release.Name }}.\n', 'templates/t.yaml': 'kind: T\n' });
    expect(ok(root)).not.toContain('Installed');
    expect(ok(root, [], { notes: true })).toBe('Installed rel.\n');
  });
});
