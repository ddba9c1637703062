// Files in the state directory (/run/kube-ipvs-proxy): what a daemon leaves for the next one on
// the node (the iptables hashes and the IPVS handoff record under proxy/ipvs/, the API source's
// resume record, source/resume.ts). Best effort both ways: a file that is missing, unreadable or
// not JSON reads as null, and a write that fails only costs the next daemon some work.
// The directory is a tmpfs on the node (the chart mounts it): a reboot clears it together with
// the kernel state its files describe.
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
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

/** A file taken from the state directory, read line by line (takeStateLines). */
export interface StateLines {
  /** The next line (without its newline), or null at the end, where the file is closed. Throws if the file cannot be read. */
  next(): string | null;
  /** Closes the file; next() then returns null. */
  close(): void;
}

/** What takeStateLines reads at a time (grown for a longer line). */
const LINE_BLOCK = 256 * 1024;

/**
 * Takes `dir/name` (null if there is none): the file is removed at once, the content stays
 * readable through the open file until close() or its last line. Lines are read a block at a
 * time into one buffer, so a large file is never in memory whole, neither as bytes nor as text.
 */
export function takeStateLines(dir: string, name: string): StateLines | null {
  const file = join(dir, name);
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    rmSync(file, { force: true });
  } catch {
    if (fd !== undefined) closeSync(fd);
    return null;
  }
  let block = Buffer.allocUnsafe(LINE_BLOCK);
  let start = 0; // the next line's first byte in block
  let end = 0; // bytes read into block
  const close = (): void => {
    if (fd !== undefined) closeSync(fd);
    fd = undefined;
    start = end = 0;
  };
  const next = (): string | null => {
    for (;;) {
      const nl = start < end ? block.indexOf(10, start) : -1;
      if (nl >= 0 && nl < end) {
        const line = block.toString('utf8', start, nl);
        start = nl + 1;
        return line;
      }
      if (fd === undefined) return null;
      // Keep the partial line at the front, grow the block if it fills it, read on.
      block.copy(block, 0, start, end);
      end -= start;
      start = 0;
      if (end === block.length) block = Buffer.concat([block, Buffer.allocUnsafe(block.length)]);
      const n = readSync(fd, block, end, block.length - end, null);
      if (n > 0) {
        end += n;
        continue;
      }
      // The end of the file: a last line without a newline still counts.
      const last = end > 0 ? block.toString('utf8', 0, end) : null;
      close();
      return last;
    }
  };
  return { next, close };
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
