// The container image the chart runs (Dockerfile): no Docker engine runs here, so this checks
// what can be checked without one. The runtime stage installs the Debian packages that ship
// every binary the daemon executes (found in src/, mapped to packages by dpkg on this Debian
// host, the same release as the image); the build stage copies everything the addon and the
// TypeScript build need and .dockerignore keeps it; the ENTRYPOINT is the built CLI that
// package.json's "bin" names.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultBinaries } from '../../src/kernel/iptables/backend.js';
import { ROOT } from '../chart/helm.js';

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  body: Instruction[];
}

/** Parses a Dockerfile into stages of instructions (continuations joined, comments dropped). */
function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (cur === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // comment inside a continuation
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(cur + line);
    cur = '';
  }
  const stages: Stage[] = [];
  for (const l of logical) {
    const m = /^(\S+)\s+(.*)$/s.exec(l)!;
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      stages.push({ from: f[1]!, name: f[2], body: [] });
    } else {
      stages.at(-1)!.body.push({ op, args });
    }
  }
  return stages;
}

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const build = stages[0]!;
const runtime = stages.at(-1)!;

/** Packages named by `apt-get install` commands in a stage's RUN instructions. */
function aptPackages(stage: Stage): string[] {
  const out: string[] = [];
  for (const { op, args } of stage.body) {
    if (op !== 'RUN') continue;
    for (const cmd of args.split(/&&|;/)) {
      const words = cmd.trim().split(/\s+/);
      const i = words.indexOf('install');
      if (words[0] !== 'apt-get' || i < 0) continue;
      out.push(...words.slice(i + 1).filter((w) => !w.startsWith('-')));
    }
  }
  return out;
}

/** COPY instructions as [sources, destination], JSON or shell form. */
function copies(stage: Stage, from?: string): Array<{ srcs: string[]; dest: string }> {
  return stage.body.filter((i) => i.op === 'COPY').flatMap(({ args }) => {
    const flags = args.match(/^(--\S+\s+)*/)![0];
    const fromFlag = /--from=(\S+)/.exec(flags)?.[1];
    if (fromFlag !== from) return [];
    const rest = args.slice(flags.length);
    const parts = rest.startsWith('[') ? (JSON.parse(rest) as string[]) : rest.split(/\s+/);
    return [{ srcs: parts.slice(0, -1), dest: parts.at(-1)! }];
  });
}

function workdir(stage: Stage): string {
  return stage.body.filter((i) => i.op === 'WORKDIR').at(-1)?.args ?? '/';
}

/** Where a COPY puts a source file, in the image: dest is a directory when it ends in / or copies a directory. */
function copiedPath(stage: Stage, file: string, from?: string): string | undefined {
  for (const { srcs, dest } of copies(stage, from)) {
    const absDest = posix.resolve(workdir(stage), dest);
    for (const src of srcs) {
      const s = posix.normalize(src).replace(/^\.\/?/, '').replace(/\/$/, '');
      const prefix = from === undefined ? s : posix.resolve(workdir(build), s);
      if (file === prefix) return dest.endsWith('/') || srcs.length > 1 ? posix.join(absDest, posix.basename(file)) : absDest;
      if (file.startsWith(`${prefix}/`)) return posix.join(absDest, file.slice(prefix.length + 1));
    }
  }
  return undefined;
}

/** Docker's .dockerignore: patterns in order, the last match wins, a match covers what is below it. */
function dockerIgnored(file: string): boolean {
  const lines = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const toRegex = (p: string): RegExp => new RegExp(`^${posix.normalize(p).replace(/\/$/, '').split('').map((c) => (c === '*' ? '[^/]*' : c === '?' ? '[^/]' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&'))).join('').replace(/\[\^\/\]\*\[\^\/\]\*/g, '.*')}(/.*)?$`);
  let ignored = false;
  for (const l of lines) {
    const negate = l.startsWith('!');
    if (toRegex(negate ? l.slice(1) : l).test(file)) ignored = !negate;
  }
  return ignored;
}

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((n) => {
    const p = posix.join(dir, n);
    return statSync(join(ROOT, p)).isDirectory() ? walk(p) : [p];
  });
}

/** Names the daemon passes to execFile/spawn as literals anywhere in src/. */
function literalExecs(): string[] {
  const out = new Set<string>();
  for (const f of walk('src').filter((p) => p.endsWith('.ts'))) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const m of text.matchAll(/\b(?:execFile|execFileSync|spawn|spawnSync|execa)\b\)?\(\s*['"`]([\w.+-]+)['"`]/g)) out.add(m[1]!);
  }
  return [...out];
}

/** Every binary the daemon may execute. */
function daemonBinaries(): string[] {
  const iptables = (['nft', 'legacy'] as const).flatMap((b) => (['ipv4', 'ipv6'] as const).flatMap((f) => Object.values(defaultBinaries(b, f))));
  return [...new Set([...iptables, ...literalExecs()])].sort();
}

// Used only where a binary is not installed on this host (dpkg answers otherwise).
const KNOWN_PACKAGES: Record<string, string> = { modprobe: 'kmod', conntrack: 'conntrack', ipvsadm: 'ipvsadm', ipset: 'ipset', ip: 'iproute2', sysctl: 'procps' };

/** The Debian package shipping a binary: dpkg -S on its path (with and without /usr: usrmerge), else the table. */
function debianPackageOf(bin: string): string | undefined {
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    const path = join(dir, bin);
    if (!existsSync(path)) continue;
    for (const candidate of [path, path.replace(/^\/usr/, ''), `/usr${path}`]) {
      const r = spawnSync('dpkg', ['-S', candidate], { encoding: 'utf8' });
      if (r.status === 0) return r.stdout.split(':')[0]!.trim();
    }
  }
  if (/^ip6?tables-(nft|legacy)(-(save|restore))?$/.test(bin)) return 'iptables'; // both backends in one package
  return KNOWN_PACKAGES[bin];
}

/** The first line of src/cli.ts: `#!/usr/bin/env -S NAME=value… node flags…`. */
function cliShebang(): { shebang: string; env: string[]; flags: string[] } {
  const shebang = readFileSync(join(ROOT, 'src/cli.ts'), 'utf8').split('\n')[0]!;
  const m = /^#!\/usr\/bin\/env -S((?: \w+=\w+)*) node((?: \S+)*)$/.exec(shebang);
  expect(m, shebang).not.toBeNull();
  const words = (t: string | undefined): string[] => (t ?? '').split(' ').filter(Boolean);
  return { shebang, env: words(m![1]), flags: words(m![2]) };
}

describe('Dockerfile', () => {
  it('is multi-stage: builds on node:20-bookworm, runs on node:20-bookworm-slim', () => {
    expect(stages.length).toBe(2);
    expect(build.from).toBe('node:20-bookworm');
    expect(build.name).toBe('build');
    expect(runtime.from).toBe('node:20-bookworm-slim');
    expect(pkg.engines.node).toBe('>=20');
  });

  it('finds what the daemon executes: the iptables binaries of both backends and families, and every literal execFile/spawn target (modprobe)', () => {
    const bins = daemonBinaries();
    expect(bins).toEqual(expect.arrayContaining(['iptables-nft-restore', 'iptables-legacy-save', 'ip6tables-nft-save', 'ip6tables-legacy-restore']));
    expect(bins.length).toBeGreaterThanOrEqual(12);
  });

  it('installs, in the runtime stage, the Debian package of every binary the daemon executes', () => {
    const installed = new Set(aptPackages(runtime));
    const missing = daemonBinaries().flatMap((bin) => {
      const p = debianPackageOf(bin);
      return p === undefined ? [`${bin}: no known Debian package (add it to KNOWN_PACKAGES)`] : installed.has(p) ? [] : [`${bin}: package ${p}`];
    });
    expect(missing).toEqual([]);
  });

  it('installs iptables (both backends), ipset, ipvsadm, kmod, conntrack and iproute2 at runtime, and no compiler', () => {
    const runtimePkgs = aptPackages(runtime);
    expect(runtimePkgs).toEqual(expect.arrayContaining(['iptables', 'ipset', 'ipvsadm', 'kmod', 'conntrack', 'iproute2']));
    for (const tool of ['g++', 'make', 'python3', 'gcc']) expect(runtimePkgs).not.toContain(tool);
    expect(aptPackages(build)).toEqual(expect.arrayContaining(['python3', 'make', 'g++']));
    // Debian's iptables package ships both backends' binaries, so the daemon's detection can pick either.
    if (spawnSync('dpkg', ['-L', 'iptables']).status === 0) {
      const files = spawnSync('dpkg', ['-L', 'iptables'], { encoding: 'utf8' }).stdout;
      for (const b of ['iptables-nft-restore', 'iptables-legacy-restore', 'ip6tables-nft-save', 'ip6tables-legacy-save']) expect(files).toMatch(new RegExp(`/${b}$`, 'm'));
    }
  });

  it('builds with npm ci (addon + TypeScript), then drops the dev dependencies', () => {
    const run = build.body.filter((i) => i.op === 'RUN').map((i) => i.args).join(' && ');
    expect(run).toMatch(/npm ci\b/);
    expect(run).toMatch(/npm prune --omit=dev/);
    expect(pkg.scripts.install).toBe('node-gyp rebuild');
    expect(pkg.scripts.prepare).toBe('npm run build');
  });

  it('copies into the build stage, and .dockerignore keeps, every source the addon and tsc need', () => {
    const gyp = JSON.parse(readFileSync(join(ROOT, 'binding.gyp'), 'utf8'));
    const sources: string[] = gyp.targets.flatMap((t: { sources: string[] }) => t.sources);
    const headers = walk('native').filter((p) => p.endsWith('.h'));
    const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8'));
    expect(tsconfig.include).toEqual(['src/**/*.ts']);
    const ts = walk('src').filter((p) => p.endsWith('.ts'));
    const needed = ['package.json', 'package-lock.json', 'binding.gyp', 'tsconfig.json', ...sources, ...headers, ...ts];
    const problems = needed.flatMap((f) => [
      ...(copiedPath(build, f) === undefined ? [`${f}: not copied into the build stage`] : []),
      ...(dockerIgnored(f) ? [`${f}: excluded by .dockerignore`] : []),
    ]);
    expect(problems).toEqual([]);
    expect(dockerIgnored('node_modules/yaml/package.json')).toBe(true);
    expect(dockerIgnored('build/Release/kube_ipvs_proxy.node')).toBe(true);
    expect(dockerIgnored('.git/config')).toBe(true);
  });

  it('imports nothing from outside src/ (only src/ is copied for tsc)', () => {
    const outside: string[] = [];
    for (const f of walk('src').filter((p) => p.endsWith('.ts'))) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      for (const m of text.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
        const target = relative(ROOT, join(ROOT, dirname(f), m[1]!));
        if (!target.startsWith('src/')) outside.push(`${f} imports ${m[1]}`);
      }
    }
    expect(outside).toEqual([]);
  });

  it('copies into the runtime stage the built CLI, the addon where binding.ts looks for it, package.json (ESM) and node_modules', () => {
    const app = workdir(runtime);
    expect(app).toBe('/app');
    const from = 'build';
    expect(copiedPath(runtime, '/app/dist/bin/cli.js', from)).toBe('/app/dist/bin/cli.js');
    expect(copiedPath(runtime, '/app/dist/bin/chunk-ANY.js', from)).toBe('/app/dist/bin/chunk-ANY.js');
    expect(copiedPath(runtime, '/app/build/Release/kube_ipvs_proxy.node', from)).toBe('/app/build/Release/kube_ipvs_proxy.node');
    expect(copiedPath(runtime, '/app/package.json', from)).toBe('/app/package.json');
    expect(copiedPath(runtime, '/app/node_modules/yaml/package.json', from)).toBe('/app/node_modules/yaml/package.json');
    expect(pkg.type).toBe('module');
    // binding.ts walks up from its chunk's directory (dist/bin/) to the first build/Release/kube_ipvs_proxy.node.
    const binding = readFileSync(join(ROOT, 'src/native/binding.ts'), 'utf8');
    expect(binding).toContain("join(dir, 'build', 'Release', 'kube_ipvs_proxy.node')");
    const gyp = JSON.parse(readFileSync(join(ROOT, 'binding.gyp'), 'utf8'));
    expect(gyp.targets[0].target_name).toBe('kube_ipvs_proxy');
  });

  it('ENTRYPOINT runs the built CLI that package.json "bin" names, and the CLI is on PATH for kubectl exec', () => {
    const entry = runtime.body.filter((i) => i.op === 'ENTRYPOINT').at(-1)!;
    // The same environment and node flags as the CLI's shebang (what the benchmarks run too).
    const { shebang, env, flags } = cliShebang();
    expect(JSON.parse(entry.args)).toEqual(['node', ...flags, '/app/dist/bin/cli.js']);
    expect(env).toContain('MALLOC_ARENA_MAX=1');
    for (const e of env) expect(runtime.body.some((i) => i.op === 'ENV' && i.args === e), `ENV ${e}`).toBe(true);
    expect(posix.join(workdir(runtime), pkg.bin['kube-ipvs-proxy'])).toBe('/app/dist/bin/cli.js');
    expect(runtime.body.some((i) => i.op === 'RUN' && i.args.includes('ln -s /app/dist/bin/cli.js /usr/local/bin/kube-ipvs-proxy'))).toBe(true);
    expect(runtime.body.some((i) => i.op === 'CMD')).toBe(false); // the chart passes only args
    // `npm test` builds first; the TypeScript source of the entry point is src/cli.ts.
    expect(existsSync(join(ROOT, 'src/cli.ts'))).toBe(true);
    const cli = join(ROOT, pkg.bin['kube-ipvs-proxy']);
    expect(existsSync(cli), `${cli} missing: run npm run build`).toBe(true);
    expect(readFileSync(cli, 'utf8').startsWith(`${shebang}\n`)).toBe(true);
  });

  it("the CLI's node flags keep node's code cache for its built-in modules (no V8 flag)", () => {
    // node's built-in modules are compiled from a code cache keyed by V8's flags: with any V8
    // flag node compiles each from source.
    const tag = (args: string[]): string => {
      const r = spawnSync(process.execPath, [...args, '-p', "require('node:v8').cachedDataVersionTag()"], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    const plain = tag([]);
    expect(tag(['--max-semi-space-size=4'])).not.toBe(plain); // what this test detects
    expect(tag(cliShebang().flags)).toBe(plain);
  });

  it('the bundle imports only node builtins, its own chunks and production dependencies (npm prune keeps them)', () => {
    const dir = join(ROOT, 'dist/bin');
    const packages = new Set<string>();
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.js'))) {
      const text = readFileSync(join(dir, f), 'utf8');
      // Static imports start a line in esbuild's output; dynamic ones and createRequire's require (renamed require2…) do not.
      const specs = /^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']|^import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']|\brequire\d*\(\s*["']([^"']+)["']/gm;
      for (const m of text.matchAll(specs)) {
        const spec = m[1] ?? m[2] ?? m[3] ?? m[4]!;
        if (spec.startsWith('.')) continue;
        if (spec.startsWith('node:')) continue;
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
    expect([...packages].filter((p) => !(p in pkg.dependencies)), [...packages].join(', ')).toEqual([]);
    // External on purpose: client-node (exec plugins and the like), pino (--log-format json), js-yaml (createRequire, loaded when first needed).
    expect([...packages].sort()).toEqual(['@kubernetes/client-node', 'js-yaml', 'pino']);
  });

  it('the built entry point starts and prints its help (node dist/bin/cli.js --help)', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'dist/bin/cli.js'), '--help'], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('--config');
    expect(r.stdout).toContain('--hostname-override');
  });
});
