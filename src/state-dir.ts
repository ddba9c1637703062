// Files in the state directory (/run/kube-ipvs-proxy): what a daemon leaves for the next one on
// the node (the iptables hashes and the IPVS handoff record under proxy/ipvs/, the API source's
// resume record, source/resume.ts). Best effort both ways: a file that is missing, unreadable or
// not JSON reads as null, and a write that fails only costs the next daemon some work.
// The directory is a tmpfs on the node (the chart mounts it): a reboot clears it together with
// the kernel state its files describe.
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The daemon's state directory; KUBE_IPVS_PROXY_STATE_DIR moves it (the tests give each daemon its own). */
export const STATE_DIR = process.env.KUBE_IPVS_PROXY_STATE_DIR || '/run/kube-ipvs-proxy';

/** The text of `dir/name`, or null; with `remove`, the file is removed once read. */
export function readStateText(dir: string, name: string, { remove = false } = {}): string | null {
  const file = join(dir, name);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  if (remove) rmSync(file, { force: true });
  return text;
}

/** The JSON value of `dir/name`, or null; with `remove`, the file is removed once read. */
export function readStateFile(dir: string, name: string, opts: { remove?: boolean } = {}): unknown {
  const text = readStateText(dir, name, opts);
  try {
    return text === null ? null : (JSON.parse(text) as unknown);
  } catch {
    return null;
  }
}

/**
 * Writes `lines` (each ended by a newline) to `dir/name` in pieces of about 1 MiB, through a
 * temporary file renamed into place: a reader sees the whole file or none. Failures are ignored.
 */
export function writeStateLines(dir: string, name: string, lines: Iterable<string>): void {
  const file = join(dir, name);
  const tmp = `${file}.tmp`;
  let fd: number | undefined;
  try {
    mkdirSync(dir, { recursive: true });
    fd = openSync(tmp, 'w');
    let buf = '';
    for (const line of lines) {
      buf += `${line}\n`;
      if (buf.length < 1 << 20) continue;
      writeSync(fd, buf);
      buf = '';
    }
    writeSync(fd, buf);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, file);
  } catch {
    // e.g. a read-only state directory: what was written of the temporary file goes, if it can
    try {
      if (fd !== undefined) closeSync(fd);
      rmSync(tmp, { force: true });
    } catch {
      // nothing more to do
    }
  }
}

/** Writes `value` as JSON to `dir/name` (the directory created if need be; whole or not at all); failures are ignored. */
export function writeStateFile(dir: string, name: string, value: unknown): void {
  writeStateLines(dir, name, [JSON.stringify(value)]);
}

/** Removes every file of the directory (cleanup: the next daemon starts from nothing); how many. */
export function clearStateDir(dir: string): number {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) rmSync(join(dir, name), { recursive: true, force: true });
  return names.length;
}
