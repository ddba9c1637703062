#!/usr/bin/env node
// Entry point: `kube-ipvs-proxy [flags]` (the daemon), `inspect [--json]`, `cleanup`.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { runCleanup } from './cleanup.js';
import { ConfigError, formatHelp, parseArgs } from './config.js';
import { runDaemon } from './daemon.js';
import { parseVip } from './config/args.js';
import { formatInspect, gatherInspect, inspectSourcesFor, type InspectSources } from './inspect.js';
import { createLogger } from './log.js';

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

/** Runs the command line; returns the exit code. */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    io.stderr(`kube-ipvs-proxy: invalid configuration:\n${e.issues.map((i) => `  ${i}`).join('\n')}\n`);
    return 2;
  }
  if (parsed.help) {
    io.stdout(formatHelp('kube-ipvs-proxy'));
    return 0;
  }
  for (const w of parsed.warnings) io.stderr(`warning: ${w}\n`);
  switch (parsed.command) {
    case 'inspect': {
      const { stats, service, vip } = parsed.inspect;
      const filter = { stats, ...(service !== undefined ? { service } : {}), ...(vip !== undefined ? { vip: parseVip(vip)! } : {}) };
      const report = await gatherInspect(io.inspectSources ?? inspectSourcesFor(parsed.config), filter);
      const filtered = service !== undefined || vip !== undefined;
      io.stdout(parsed.json ? `${JSON.stringify(report)}\n` : formatInspect(report, { ipvsOnly: filtered }));
      return 0;
    }
    case 'cleanup':
      return runCleanup(parsed.config, createLogger(parsed.config.log));
    case 'run':
      return runDaemon(parsed.config, createLogger(parsed.config.log));
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

if (isEntryPoint()) {
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
