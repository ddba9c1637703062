#!/usr/bin/env node
// `npm test`: runs the vitest projects, each in its environment, and sums up the results.
//   unit  - on the host
//   netns - in a fresh network (and mount) namespace: `unshare -n -m`, lo up, private /run/netns
//   uml   - inside User-Mode Linux (test/harness/uml.mjs); expects `npm ci` done
// First it builds the pinned etcd, Kubernetes and Helm binaries that are not in the cache yet.
// Usage: npm test -- [--only unit,netns,uml] [vitest args and file filters...]
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ensureModuleFiles, ensureTools } from '../tools/build.mjs';
import { findUmlKernel, runInUml } from './uml.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');
const RESULTS = join(ROOT, '.test-results');
/** This run's report of a phase (or shard); a finished phase's is then kept as <phase>.json. */
const report = (name) => join(RESULTS, `${name}.${process.pid}.json`);
const PHASES = ['unit', 'netns', 'uml'];
const UML_TIMEOUT_MS = Number(process.env.KIP_UML_TIMEOUT_S ?? 40 * 60) * 1000;

/** Splits argv into the phases to run and the arguments passed through to vitest. */
function parseArgs(argv) {
  let only = PHASES;
  const passthrough = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm test -- [--only unit,netns,uml] [vitest args and file filters...]\n');
      process.exit(0);
    } else if (a === '--only' || a.startsWith('--only=')) {
      const value = a === '--only' ? argv[++i] : a.slice('--only='.length);
      only = (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      const bad = only.filter((p) => !PHASES.includes(p));
      if (bad.length > 0 || only.length === 0) {
        process.stderr.write(`run-all: --only takes a list of ${PHASES.join(', ')}; got ${JSON.stringify(value)}\n`);
        process.exit(2);
      }
    } else {
      passthrough.push(a);
    }
  }
  return { only: PHASES.filter((p) => only.includes(p)), passthrough };
}

/**
 * True when the vitest arguments narrow the run: a file filter (a positional argument) or a
 * test-name filter (-t / --testNamePattern). Only then may a phase collect no test.
 */
function hasFilter(passthrough) {
  return passthrough.some((a, i) => {
    if (a === '-t' || a === '--testNamePattern' || a.startsWith('-t=') || a.startsWith('--testNamePattern=')) return true;
    if (a.startsWith('-')) return false;
    // A bare word after `--option` is that option's value (`--bail 1`), unless it looks like a path.
    const prev = passthrough[i - 1];
    return prev === undefined || !prev.startsWith('-') || prev.includes('=') || /[/.]/.test(a);
  });
}

/** The vitest argv for one project, with the json reporter writing to .test-results/<report>.json. */
function vitestArgs(phase, passthrough, name = phase) {
  return [VITEST, 'run', '--project', phase, ...(hasFilter(passthrough) ? ['--passWithNoTests'] : []),
    '--reporter=default', '--reporter=json', `--outputFile.json=${report(name)}`, ...passthrough];
}

/** Seconds the longest UML files take, for a checkout without an earlier run; others count UML_FILE_S. */
const UML_HEAVY_S = {
  'kube-proxy-parity-changes.test.ts': 280, 'kube-proxy-parity.test.ts': 200, 'cluster.test.ts': 150, 'faults.test.ts': 145,
  'e2e.test.ts': 80, 'conntrack.test.ts': 77, 'ipset.test.ts': 58, 'source-ranges.test.ts': 57, 'external-local.test.ts': 48,
};
const UML_FILE_S = 15;

/**
 * The UML test files in `n` groups of about equal run time, one UML boot each (UML has one CPU):
 * weighted by the last run's durations (.test-results/uml.json), else by UML_HEAVY_S.
 */
function umlShards(n, files) {
  const last = new Map();
  try {
    for (const r of JSON.parse(readFileSync(join(RESULTS, 'uml.json'), 'utf8')).testResults ?? []) last.set(basename(r.name), (r.endTime - r.startTime) / 1000);
  } catch { /* no earlier run */ }
  const shards = Array.from({ length: n }, () => ({ files: [], weight: 0 }));
  for (const [f, w] of files.map((f) => [f, last.get(f) ?? UML_HEAVY_S[f] ?? UML_FILE_S]).sort((a, b) => b[1] - a[1])) {
    const lightest = shards.reduce((a, b) => (b.weight < a.weight ? b : a));
    lightest.files.push(`test/kernel/uml/${f}`);
    lightest.weight += w;
  }
  return shards.filter((sh) => sh.files.length > 0).map((sh) => sh.files.sort());
}

/** One report from the shards' reports: their tests and counts summed. */
function mergeReports(names, into) {
  const reports = names.map((n) => JSON.parse(readFileSync(report(n), 'utf8')));
  for (const n of names) rmSync(report(n));
  const merged = { ...reports[0], testResults: reports.flatMap((r) => r.testResults ?? []) };
  for (const k of Object.keys(reports[0]).filter((k) => /^num/.test(k))) merged[k] = reports.reduce((a, r) => a + (r[k] ?? 0), 0);
  merged.success = reports.every((r) => r.success);
  writeFileSync(report(into), JSON.stringify(merged));
}

/** A stream that writes each line of what it gets to stdout behind `prefix`. */
function prefixed(prefix) {
  let partial = '';
  return new Writable({
    write(chunk, _enc, done) {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop();
      if (lines.length) process.stdout.write(lines.map((l) => `${prefix}${l}\n`).join(''));
      done();
    },
    final(done) {
      if (partial) process.stdout.write(`${prefix}${partial}\n`);
      done();
    },
  });
}

/** Runs a program with inherited stdio; resolves to its exit code (or 128+signal, or 127 if it cannot start). */
function runInherit(file, args, env = process.env) {
  return new Promise((res) => {
    const child = spawn(file, args, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env });
    child.once('error', (e) => { process.stderr.write(`run-all: cannot start ${file}: ${e.message}\n`); res(127); });
    child.once('exit', (code, signal) => res(code ?? 128 + (signal === 'SIGKILL' ? 9 : 15)));
  });
}

/** True when `cmd` is on PATH. */
function have(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

const runners = {
  unit: (passthrough) => runInherit(process.execPath, vitestArgs('unit', passthrough)),

  async netns(passthrough) {
    for (const cmd of ['unshare', 'ip']) {
      if (!have(cmd)) throw new Error(`${cmd} not found: the netns phase needs util-linux and iproute2`);
    }
    const setup = 'set -e; ip link set lo up; mkdir -p /run/netns; mount -t tmpfs -o mode=755 kip-netns /run/netns; exec "$@"';
    const env = { ...process.env, KIP_HOST_NETNS: readlinkSync('/proc/self/ns/net') };
    const code = await runInherit('unshare', ['--net', '--mount', '--propagation', 'private', '--', 'sh', '-c', setup, 'sh',
      process.execPath, ...vitestArgs('netns', passthrough)], env);
    return code;
  },

  async uml(passthrough) {
    if (!findUmlKernel()) throw new Error(`${process.env.KIP_UML_KERNEL || "linux.uml"} not found: the uml phase needs the Debian package user-mode-linux`);
    // One boot per CPU (KIP_UML_BOOTS), each with its share of the files: all of them, or the
    // UML test files named (any other filter: one boot).
    const named = passthrough.filter((a) => /^test\/kernel\/uml\/[\w.-]+\.test\.ts$/.test(a));
    const options = passthrough.filter((a) => !named.includes(a));
    const files = named.length ? named.map((f) => basename(f)) : readdirSync(join(ROOT, 'test/kernel/uml')).filter((f) => f.endsWith('.test.ts'));
    const boots = hasFilter(options) ? 1 : Math.min(files.length, Number(process.env.KIP_UML_BOOTS ?? Math.min(2, availableParallelism())));
    const shards = boots > 1 ? umlShards(boots, files.sort()) : [[]];
    const names = shards.map((_, k) => (shards.length > 1 ? `uml-${k + 1}` : 'uml'));
    const results = await Promise.all(shards.map(async (files, k) => {
      const tag = shards.length > 1 ? `[uml ${k + 1}] ` : '';
      const output = shards.length > 1 ? prefixed(tag) : process.stdout;
      // 2G: the control-plane tests run etcd, kube-apiserver and kube-controller-manager in the same boot.
      const r = await runInUml({ command: [process.execPath, ...vitestArgs('uml', files.length ? [...options, ...files] : passthrough, names[k])], cwd: ROOT, timeoutMs: UML_TIMEOUT_MS, mem: '2G', output });
      output.end?.();
      process.stdout.write(`[uml${shards.length > 1 ? ` ${k + 1}` : ''}] ${files.length ? `${files.length} files, ` : ''}boot ${(r.bootMs / 1000).toFixed(1)} s, total ${(r.totalMs / 1000).toFixed(1)} s\n`);
      return r;
    }));
    if (results.some((r) => r.timedOut)) throw new Error(`UML timed out after ${UML_TIMEOUT_MS / 1000} s (KIP_UML_TIMEOUT_S)`);
    if (shards.length > 1) mergeReports(names, 'uml');
    return results.find((r) => r.code !== 0)?.code ?? 0;
  },
};

/** Reads a phase's json report into counts; file-level errors (a suite that failed with no failing test) count as failed. */
function firstLine(text) {
  const line = String(text ?? '').split('\n').find((l) => l.trim() !== '') ?? '(no message)';
  return line.trim().slice(0, 300);
}

function readCounts(phase) {
  const r = JSON.parse(readFileSync(report(phase), 'utf8'));
  renameSync(report(phase), join(RESULTS, `${phase}.json`));
  const fileErrors = (r.testResults ?? []).filter((f) => f.status === 'failed'
    && !(f.assertionResults ?? []).some((t) => t.status === 'failed')).length;
  // Named in the summary, so a CI log that keeps only its tail still says what failed.
  const failures = (r.testResults ?? []).flatMap((f) => {
    const file = relative(process.cwd(), f.name ?? '');
    const failed = (f.assertionResults ?? []).filter((t) => t.status === 'failed');
    if (f.status === 'failed' && failed.length === 0) return [`${file}: ${firstLine(f.message)}`];
    return failed.map((t) => `${file} > ${t.fullName ?? t.title}: ${firstLine((t.failureMessages ?? [])[0])}`);
  });
  return {
    failures,
    passed: r.numPassedTests ?? 0,
    failed: (r.numFailedTests ?? 0) + fileErrors,
    skipped: (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0),
    fileErrors,
  };
}

const { only, passthrough } = parseArgs(process.argv.slice(2));
mkdirSync(RESULTS, { recursive: true });
// The real etcd, Kubernetes and Helm binaries the tests run, built once per version (test/tools/).
ensureTools(undefined, (line) => process.stdout.write(`[tools] ${line}\n`));
ensureModuleFiles((line) => process.stdout.write(`[tools] ${line}\n`));
const summary = [];
for (const phase of only) {
  process.stdout.write(`\n=== ${phase} ===\n`);
  const started = Date.now();
  let code;
  let error = null;
  try {
    code = await runners[phase](passthrough);
  } catch (e) {
    code = -1;
    error = e.message;
  }
  let counts = null;
  if (error === null) {
    try {
      counts = readCounts(phase);
    } catch {
      error = `no results (.test-results/${phase}.json missing or unreadable; exit code ${code})`;
    }
  }
  if (error === null && counts.passed + counts.failed === 0 && !hasFilter(passthrough)) {
    error = `collected no test${counts.skipped ? ` (${counts.skipped} skipped)` : ''}; only a file or -t filter may leave a phase empty`;
  }
  if (error === null && code !== 0 && counts.failed === 0) error = `vitest exited with ${code} (unhandled error?)`;
  summary.push({ phase, code, error, counts, seconds: (Date.now() - started) / 1000 });
}

const total = { passed: 0, failed: 0, skipped: 0 };
process.stdout.write('\n=== summary ===\n');
for (const { phase, error, counts, seconds } of summary) {
  const c = counts ?? { passed: 0, failed: 0, skipped: 0, fileErrors: 0 };
  for (const k of Object.keys(total)) total[k] += c[k];
  const line = `${c.passed} passed, ${c.failed} failed${c.skipped ? `, ${c.skipped} skipped` : ''}`
    + (c.fileErrors ? ` (${c.fileErrors} file errors)` : '');
  process.stdout.write(`[${phase}] ${error ? `FAILED: ${error}` : line}${error && counts ? `; ${line}` : ''} (${seconds.toFixed(1)} s)\n`);
  for (const failure of c.failures ?? []) process.stdout.write(`[${phase}]   FAILED ${failure}\n`);
}
const ok = summary.every((s) => s.error === null && s.code === 0) && total.failed === 0;
process.stdout.write(`tests: ${total.passed} passed, ${total.failed} failed${total.skipped ? `, ${total.skipped} skipped` : ''}\n`);
process.exit(ok ? 0 : 1);
