#!/usr/bin/env -S MALLOC_ARENA_MAX=1 node
// Environment above: the image (ENV) and the benchmarks use the same.
// - One glibc malloc arena for every thread: otherwise libuv's and V8's threads each fill an arena
//   that malloc_trim cannot empty while a few blocks live (docs/decisions.md). It must be set
//   before node starts: glibc creates the arenas before any of our code runs.
// - No V8 flags (test/unit/chart-image.test.ts checks): any V8 flag makes node compile its
//   built-in modules from source instead of its embedded code cache. V8 sizes its heap from the
//   memory limit instead.
// Entry point: `kube-ipvs-proxy [flags]` (the daemon), `inspect [--json]`, `cleanup`.
import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { ConfigError, formatHelp, parseArgs } from './config.js';
import { checkReadable, parseVip } from './config/args.js';
import type { InspectSources } from './inspect.js';
import { openLogger } from './log.js';
import { withNodeLock, type NodeLockError } from './lock.js';

/** Where the CLI writes; injectable so tests can run it in-process. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  inspectSources?: InspectSources;
}

const processIo: CliIo = {
  stdout: (t) => void process.stdout.write(t),
  stderr: (t) => void process.stderr.write(t),
};

/** package.json's version: the file is one level above src/cli.ts, two above dist/{src,bin}/cli.js. */
function packageVersion(): string {
  for (const up of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'kube-ipvs-proxy' && pkg.version) return pkg.version;
    } catch {
      // not there: one level further up
    }
  }
  return 'unknown';
}

/** Runs the command line; returns the exit code. */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(argv, { checkPath: checkReadable });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const [only] = e.issues;
    io.stderr(e.issues.length === 1 ? `kube-ipvs-proxy: invalid configuration: ${only}\n` : `kube-ipvs-proxy: invalid configuration:\n${e.issues.map((i) => `  ${i}`).join('\n')}\n`);
    return 2;
  }
  if (parsed.help) {
    io.stdout(formatHelp('kube-ipvs-proxy'));
    return 0;
  }
  if (parsed.version) {
    io.stdout(`kube-ipvs-proxy v${packageVersion()}\n`);
    return 0;
  }
  for (const w of parsed.warnings) io.stderr(`warning: ${w}\n`);
  // Each command imports only its own modules: start-up time is module loading.
  switch (parsed.command) {
    case 'inspect': {
      const { formatInspect, gatherInspect, inspectSourcesFor } = await import('./inspect.js');
      const { stats, service, vip } = parsed.inspect;
      const filter = { stats, ...(service !== undefined ? { service } : {}), ...(vip !== undefined ? { vip: parseVip(vip)! } : {}) };
      const report = await gatherInspect(io.inspectSources ?? inspectSourcesFor(parsed.config), filter);
      const filtered = service !== undefined || vip !== undefined;
      io.stdout(parsed.json ? `${JSON.stringify(report)}\n` : formatInspect(report, { ipvsOnly: filtered }));
      return 0;
    }
    case 'cleanup':
    case 'run': {
      const { config, command } = parsed;
      const logger = await openLogger(config.log);
      let locked = false;
      const onLocked = (e: NodeLockError): void => {
        locked = true;
        logger.error({ lock: `@${e.lockName}`, holderPid: e.holderPid }, `${command === 'cleanup' ? 'cleanup' : 'not starting'}: ${e.message}`);
      };
      // One writer per node: the daemon and cleanup hold the node lock; --dry-run only reads.
      if (command === 'cleanup') return withNodeLock(async () => (await import('./cleanup.js')).runCleanup(config, logger), onLocked);
      // The source starts reading first (it writes nothing), before the daemon's own (larger)
      // module graph is loaded and before the lock; the kernel is touched only under the lock.
      const early = await (await import('./source/start.js')).startSource(config, logger, { resume: !config.dryRun });
      const run = async (): Promise<number> => (await import('./daemon.js')).runDaemon(config, logger, early);
      if (config.dryRun) return run();
      const code = await withNodeLock(run, onLocked);
      if (locked) await early.source.stop();
      return code;
    }
  }
}

function isEntryPoint(): boolean {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/** Runs the CLI on this process's arguments and sets its exit code. */
function runAsEntryPoint(): void {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`kube-ipvs-proxy: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}

if (isEntryPoint()) runAsEntryPoint();
