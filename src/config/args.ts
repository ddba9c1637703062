// parseArgs: kube-proxy-style command line (+ optional --config file) → command and Config.

import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { toList } from './convert.js';
import { parseKubeProxyConfiguration } from './file.js';
import { FLAG_DEFS, UNSUPPORTED_KUBE_PROXY_FLAGS, findFlag, suggestFlag, type FlagDef } from './flags.js';
import { ConfigError, Layer } from './layer.js';
import { ipFamily } from './net.js';
import { ConfigSchema, defaultConfig, HEALTHZ_PORT, METRICS_PORT, type Config } from './schema.js';

/** What the process was asked to do. */
export type Command = 'run' | 'inspect' | 'cleanup';

/** The outcome of parseArgs. */
export interface ParsedArgs {
  command: Command;
  config: Config;
  /** inspect --json. */
  json: boolean;
  /** inspect's other flags: --stats, --service NS/NAME, --vip IP[:PORT]. */
  inspect: InspectFlags;
  /** --help / -h was given: print formatHelp(); `config` is then the defaults and nothing was validated. */
  help: boolean;
  /** --version was given: print the version; `config` is then the defaults and nothing was validated. */
  version: boolean;
  /** Non-fatal notes (ignored config-file fields, flags that do not apply to the mode). */
  warnings: string[];
}

/** inspect's filters and --stats. */
export interface InspectFlags {
  stats: boolean;
  service?: string;
  vip?: string;
}

/** Injectable I/O for parseArgs. */
export interface ParseArgsOptions {
  /** Reads the --config file (default: fs.readFileSync as UTF-8). */
  readFile?: (path: string) => string;
  /**
   * Checks the files the daemon (`run`) will read, --kubeconfig (a file) and --manifests (a file or
   * directory): returns why one cannot be read, or null. Default: no check (the CLI passes checkReadable).
   */
  checkPath?: (path: string, kind: PathKind) => string | null;
}

/** What a path setting must name. */
export type PathKind = 'file' | 'file-or-dir';

/** The path settings checkPath looks at. */
const PATH_SETTINGS = [['kubeconfig', 'file'], ['manifests', 'file-or-dir']] as const;

const ERRNO_TEXT: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'a component of the path is not a directory',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'name too long',
};

/** checkPath on the real filesystem: the path exists, has the kind asked for, and can be read (a directory: listed). */
export function checkReadable(path: string, kind: PathKind): string | null {
  try {
    const st = statSync(path);
    if (st.isDirectory()) {
      if (kind === 'file') return `${path} is a directory, not a file`;
      accessSync(path, constants.R_OK | constants.X_OK);
    } else if (!st.isFile()) {
      return `${path} is not a regular file`;
    } else {
      accessSync(path, constants.R_OK);
    }
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return `cannot read ${path}: ${(code !== undefined && ERRNO_TEXT[code]) || (err as Error).message}`;
  }
}

const COMMANDS: readonly Command[] = ['run', 'inspect', 'cleanup'];

/** Labels for values that still have their defaults: the flag that sets them. */
const DEFAULT_LABELS = new Map(FLAG_DEFS.filter((f) => f.path !== undefined).map((f) => [f.path!, `--${f.name}`]));

/**
 * Parses argv (without node and the script) into a command and a validated Config.
 * Throws ConfigError listing every problem, each naming its flag or config-file field.
 */
export function parseArgs(argv: readonly string[], options: ParseArgsOptions = {}): ParsedArgs {
  const cli = scan(argv);
  if (cli.help || cli.version) return { command: cli.command ?? 'run', config: defaultConfig(), json: cli.json, inspect: cli.inspect, help: cli.help, version: cli.version, warnings: [] };
  const issues = [...cli.issues];
  const warnings: string[] = [];
  const merged = new Layer();
  if (cli.configFile !== undefined) {
    try {
      const file = parseKubeProxyConfiguration(readConfigFile(cli.configFile, options), cli.configFile);
      warnings.push(...file.warnings);
      merged.overlay(file.layer);
      merged.set('configFile', cli.configFile, { label: '--config' });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      issues.push(...err.issues);
    }
  }
  merged.overlay(cli.layer);
  warnings.push(...resolveModeDependent(merged, cli.layer));

  const command = cli.command ?? 'run';
  if (cli.json && command !== 'inspect') issues.push('--json: only valid with the inspect command');
  for (const f of ['stats', 'service', 'vip'] as const) {
    if (cli.inspect[f] !== undefined && cli.inspect[f] !== false && command !== 'inspect') issues.push(`--${f}: only valid with the inspect command`);
  }
  const result = ConfigSchema.safeParse(merged.toInput());
  if (!result.success) {
    for (const iss of result.error.issues) {
      const path = iss.path.join('.');
      const label = merged.describe(iss.path) ?? DEFAULT_LABELS.get(path) ?? DEFAULT_LABELS.get(`${modeOf(merged)}.${path}`) ?? path;
      issues.push(`${label}: ${iss.message}`);
    }
  }
  if (result.success && command === 'run' && options.checkPath) {
    for (const [key, kind] of PATH_SETTINGS) {
      const path = result.data[key];
      const why = path === undefined ? null : options.checkPath(path, kind);
      if (why !== null) issues.push(`${merged.describe([key]) ?? `--${key}`}: ${why}`);
    }
  }
  if (issues.length > 0 || !result.success) throw new ConfigError(issues);
  return { command, config: result.data, json: cli.json, inspect: cli.inspect, help: false, version: false, warnings };
}

function readConfigFile(path: string, options: ParseArgsOptions): string {
  const read = options.readFile ?? ((p: string) => readFileSync(p, 'utf8'));
  try {
    return read(path);
  } catch (err) {
    throw new ConfigError([`--config: cannot read ${path}: ${(err as Error).message}`]);
  }
}

/** Picks the sync periods of the mode in use and the IPv6 server defaults, as kube-proxy does. */
function resolveModeDependent(merged: Layer, flags: Layer): string[] {
  const warnings: string[] = [];
  const mode = modeOf(merged);
  const other = mode === 'ipvs' ? 'iptables' : 'ipvs';
  for (const key of ['syncPeriodMs', 'minSyncPeriodMs']) {
    const unused = flags.origins.get(`${other}.${key}`);
    if (unused !== undefined) warnings.push(`${unused.label}: ignored in ${mode} mode`);
    merged.move(`${mode}.${key}`, key);
    merged.values.delete(`${other}.${key}`);
  }
  const bind = merged.values.get('bindAddress');
  if (typeof bind === 'string' && ipFamily(bind) === 6) {
    const label = { label: '--bind-address' };
    if (!merged.values.has('healthzBindAddress')) merged.set('healthzBindAddress', { host: '::', port: HEALTHZ_PORT }, label);
    if (!merged.values.has('metricsBindAddress')) merged.set('metricsBindAddress', { host: '::1', port: METRICS_PORT }, label);
  }
  return warnings;
}

function modeOf(layer: Layer): 'ipvs' | 'iptables' {
  return layer.values.get('mode') === 'iptables' ? 'iptables' : 'ipvs';
}

interface Scan {
  layer: Layer;
  issues: string[];
  command?: Command;
  configFile?: string;
  json: boolean;
  inspect: InspectFlags;
  help: boolean;
  version: boolean;
}

/** Tokenises argv like pflag: --name=value, --name value, bare booleans, -v N, -vN, --, and one positional command. */
function scan(argv: readonly string[]): Scan {
  const out: Scan = { layer: new Layer(), issues: [], json: false, inspect: { stats: false }, help: false, version: false };
  const seenLists = new Set<string>();
  let positionalOnly = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (positionalOnly || arg === '-' || !arg.startsWith('-')) {
      positional(out, arg);
      continue;
    }
    if (arg === '--') {
      positionalOnly = true;
      continue;
    }
    const long = arg.startsWith('--');
    const eq = arg.indexOf('=');
    const name = long ? arg.slice(2, eq < 0 ? undefined : eq) : arg.slice(1, 2);
    const shown = `${long ? '--' : '-'}${name}`;
    const flag = findFlag(name);
    const tail = arg.slice(2);
    const shortOk = long ? name.length > 1 || name === 'v' : flag?.kind !== 'bool' || tail === '' || tail.startsWith('=');
    if (flag === undefined || !shortOk) {
      const whole = arg.replace(/=.*$/s, '');
      out.issues.push(unknownFlagMessage(whole, whole.replace(/^--?/, '')));
      continue;
    }
    let value: string | undefined = long ? (eq < 0 ? undefined : arg.slice(eq + 1)) : tail.replace(/^=/, '') || undefined;
    if (value === undefined) {
      if (flag.kind === 'bool') value = 'true';
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) value = argv[++i]!;
      else {
        out.issues.push(`${shown}: missing value`);
        continue;
      }
    }
    apply(out, flag, value, shown, seenLists);
  }
  return out;
}

function apply(out: Scan, flag: FlagDef, text: string, shown: string, seenLists: Set<string>): void {
  let value: unknown;
  try {
    value = flag.kind === 'list' ? toList(text).map(flag.convert!) : flag.convert!(text);
  } catch (err) {
    out.issues.push(`${shown}: ${(err as Error).message}`);
    return;
  }
  const origin = { label: `--${flag.name}` };
  switch (flag.special) {
    case 'config':
      if (value === '') out.issues.push(`${shown}: must not be empty`);
      else out.configFile = String(value);
      return;
    case 'help':
      out.help ||= value === true;
      return;
    case 'version':
      out.version ||= value === true;
      return;
    case 'json':
      out.json = value === true;
      return;
    case 'inspect':
      if (flag.name === 'stats') out.inspect.stats = value === true;
      else if (flag.name === 'service') {
        if (!/^[a-z0-9][-a-z0-9.]*\/[a-z0-9][-a-z0-9.]*$/.test(String(value))) out.issues.push(`${shown}: expected NAMESPACE/NAME, got ${JSON.stringify(value)}`);
        else out.inspect.service = String(value);
      } else {
        const vip = parseVip(String(value));
        if (vip === null) out.issues.push(`${shown}: expected IP or IP:PORT ([IPv6]:PORT), got ${JSON.stringify(value)}`);
        else out.inspect.vip = String(value);
      }
      return;
    case 'no-fallback':
      out.layer.set('fallback', value !== true, { label: shown });
      return;
    case 'cleanup':
      if (value === true) setCommand(out, 'cleanup', '--cleanup');
      return;
  }
  if (flag.kind === 'list' && seenLists.has(flag.name)) out.layer.append(flag.path!, value as unknown[], origin);
  else out.layer.set(flag.path!, value, origin);
  if (flag.kind === 'list') seenLists.add(flag.name);
}

/** `IP`, `IP:PORT` or `[IPv6]:PORT` -> address (as given) and port (null when absent); null if malformed. */
export function parseVip(text: string): { address: string; port: number | null } | null {
  let m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text);
  if (!m && ipFamily(text) !== 0) return { address: text, port: null };
  m ??= /^([^:]+):(\d{1,5})$/.exec(text);
  if (!m || ipFamily(m[1]!) === 0) return null;
  const port = m[2] === undefined ? null : Number(m[2]);
  return port !== null && port > 65535 ? null : { address: m[1]!, port };
}

function positional(out: Scan, arg: string): void {
  if (!(COMMANDS as readonly string[]).includes(arg)) {
    out.issues.push(out.command === undefined ? `unknown command ${JSON.stringify(arg)} (valid: inspect, cleanup)` : `unexpected argument ${JSON.stringify(arg)}`);
    return;
  }
  setCommand(out, arg as Command, arg);
}

function setCommand(out: Scan, command: Command, shown: string): void {
  if (out.command !== undefined && out.command !== command) {
    out.issues.push(`${shown}: conflicts with the ${out.command} command`);
  } else if (out.command === command && shown !== '--cleanup') {
    out.issues.push(`unexpected argument ${JSON.stringify(shown)}`);
  } else {
    out.command = command;
  }
}

function unknownFlagMessage(shown: string, name: string): string {
  if (name !== undefined && UNSUPPORTED_KUBE_PROXY_FLAGS.has(name)) return `${shown}: kube-proxy flag not supported by kube-ipvs-proxy`;
  const hint = suggestFlag(name);
  return `unknown flag ${shown}${hint === undefined ? '' : ` (did you mean ${hint.length === 1 ? '-' : '--'}${hint}?)`}`;
}
