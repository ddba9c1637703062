// --manifests FILE|DIR: Services, EndpointSlices and this node's Node from YAML/JSON files,
// watched. A directory is read non-recursively (*.yaml, *.yml, *.json; dot-files skipped).
//
// Last good state: a file that fails (broken YAML, an unreadable file, an invalid object) never
// deletes anything it contributed before. Its valid objects are applied; every object it
// contributed before and does not validly define now stays at its last good version until the
// file reads cleanly. Unknown kinds are reported and skipped without failing the file. Duplicate
// objects (same kind and namespace/name): the first in (file, document, item) order wins.
// Changes are delivered as differences, in that order: an object whose document's text is unchanged
// (an item of a `kind: List`: whose validated form is) is not delivered again.
//
// One file, one error: whatever goes wrong with a file (unreadable, a directory or a FIFO under a
// manifest name, a symlink loop, larger than maxFileBytes, not UTF-8, broken YAML, an alias bomb)
// is reported once, naming the file, and that file keeps its last good state; the other files are
// read and applied as usual, at start-up and on every re-read. The same error is not reported
// again until the file changes or its error does.
import { isUtf8 } from 'node:buffer';
import { constants, watch, type FSWatcher } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';

import type { Logger } from '../log.js';
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';
import { digest, parseManifest, type ManifestObject } from './manifest-parse.js';
import type { ProxySource, SourceHandler } from './types.js';

/** Options of a ManifestSource. */
export interface ManifestSourceOptions {
  /** A file (read whatever its extension) or a directory. */
  path: string;
  /** The Node whose metadata.name is this is delivered via onNode; other Nodes are ignored. */
  nodeName: string;
  /** Re-read when the files change (default true). */
  watch?: boolean;
  /** Quiet time after the last file event before re-reading (default 200 ms). */
  debounceMs?: number;
  /** A larger file is that file's error (default MAX_MANIFEST_BYTES). */
  maxFileBytes?: number;
  logger?: Logger;
}

/** Default size limit of one manifest file: 64 MiB (10,000 Services + slices with full metadata fit). */
export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

/** Where an object was defined. */
type Located = Pick<ManifestObject, 'kind' | 'key' | 'file' | 'doc' | 'item'>;

/**
 * An object as the source keeps it between reads: where it is defined and its digest (`sig`,
 * compared with the next read's); the object itself only until it has been delivered (the handler
 * keeps what it needs of it). One that must be delivered again later (a duplicate that now wins) is
 * read again from its file.
 */
interface Held extends Located {
  sig: string;
  object?: ManifestObject['object'] | undefined;
}

interface FileState {
  /** sha256 of the content last parsed; null when the file could not be read (retried every round). */
  digest: string | null;
  objects: Held[];
  /** The read error last reported for this file (reported again only when it changes). */
  readError?: string;
}

const MANIFEST_NAME = /^[^.].*\.(ya?ml|json)$/i;

/** Objects from manifest files; see the file comment for the error semantics. */
export class ManifestSource implements ProxySource {
  readonly #opts: Required<Omit<ManifestSourceOptions, 'logger'>> & { logger: Logger | undefined };
  #handler: SourceHandler | undefined;
  #files = new Map<string, FileState>();
  /** What the handler holds, by `Kind:key`. */
  #delivered = new Map<string, Held>();
  #duplicates = new Set<string>();
  /** The objects #reread could not give back, as last reported (reported again only when new). */
  #lost = new Set<string>();
  /** The listing error last reported (reported again only when it changes). */
  #listError: string | undefined;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(options: ManifestSourceOptions) {
    this.#opts = { watch: true, debounceMs: 200, maxFileBytes: MAX_MANIFEST_BYTES, ...options, logger: options.logger };
  }

  /** Reads everything, delivers it, calls onSynced; rejects if the path cannot be read at all. */
  async start(handler: SourceHandler): Promise<void> {
    this.#handler = handler;
    const isDir = (await stat(this.#opts.path)).isDirectory();
    if (this.#opts.watch) {
      // Watch the directory (for a file: its parent) before reading, so no change is missed;
      // editors and ConfigMap mounts replace files, which a watch on the file itself would lose.
      this.#watcher = watch(isDir ? this.#opts.path : dirname(this.#opts.path), () => this.#schedule());
      this.#watcher.on('error', (err) => this.#report({ object: this.#opts.path, reason: `watch failed: ${err.message}` }));
    }
    try {
      await this.#sync(true);
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.#opts.logger?.info({ path: this.#opts.path, objects: this.#delivered.size }, 'manifests: initial read done');
    handler.onSynced();
  }

  /** Closes the watcher; no delivery happens after stop() resolves. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
    await this.#running;
  }

  #schedule(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#resync(), this.#opts.debounceMs);
  }

  async #resync(): Promise<void> {
    if (this.#running) {
      this.#again = true;
      return;
    }
    const loop = async (): Promise<void> => {
      do {
        this.#again = false;
        try {
          await this.#sync(false);
        } catch (err) {
          this.#opts.logger?.error({ err }, 'manifests: re-read failed');
        }
      } while (this.#again && !this.#stopped);
    };
    this.#running = loop();
    await this.#running;
    this.#running = undefined;
  }

  /** Lists the manifest files, sorted; throws if the path is unreadable. */
  async #list(): Promise<string[]> {
    const path = this.#opts.path;
    if (!(await stat(path)).isDirectory()) return [path];
    return (await readdir(path)).filter((n) => MANIFEST_NAME.test(n)).sort(byString).map((n) => join(path, n));
  }

  async #sync(initial: boolean): Promise<void> {
    let files: string[];
    try {
      files = await this.#list();
    } catch (err) {
      if (initial) throw err;
      const reason = `cannot list: ${(err as Error).message}; keeping the last good state`;
      if (reason !== this.#listError) this.#report({ object: this.#opts.path, reason });
      this.#listError = reason;
      return;
    }
    this.#listError = undefined;
    const next = new Map<string, FileState>();
    const scratch: Scratch = { buf: undefined };
    for (const file of files) {
      let state: FileState | undefined;
      try {
        state = await this.#readFile(file, scratch);
      } catch (err) {
        // Not expected (#readFile handles its own errors); still this file's error alone.
        state = this.#failed(file, `cannot read: ${(err as Error)?.message ?? String(err)}`);
      }
      if (!state) continue;
      next.set(file, state);
      if (initial) this.#deliverRead(state);
    }
    if (this.#stopped) return;
    this.#files = next;
    await this.#deliver(this.#merge(), initial, scratch);
  }

  /** The new state of one file; undefined when it vanished. */
  async #readFile(file: string, scratch: Scratch): Promise<FileState | undefined> {
    const prev = this.#files.get(file);
    const read = await readBounded(file, this.#opts.maxFileBytes, scratch);
    if (read === undefined) return undefined;
    if (typeof read === 'string') return this.#failed(file, read);
    const sum = digest(read);
    if (prev && prev.digest === sum) return prev;
    if (!isUtf8(read)) return this.#failed(file, 'not valid UTF-8 text', sum);
    const parsed = parseManifest(file, read);
    parsed.errors.forEach((e) => this.#report(e));
    const objects: Held[] = parsed.objects; // the parse's own objects, held as they are
    if (!parsed.failed || !prev) return { digest: sum, objects };
    const defined = new Set(objects.map(id));
    return { digest: sum, objects: [...objects, ...prev.objects.filter((o) => !defined.has(id(o)))] };
  }

  /** A file that cannot be used as a whole: its last good objects, the error reported once. */
  #failed(file: string, reason: string, sum: string | null = null): FileState {
    const prev = this.#files.get(file);
    if (prev?.readError !== reason) this.#report({ object: file, reason: `${reason}; keeping its last good state` });
    return { digest: sum, objects: prev?.objects ?? [], readError: reason };
  }

  /**
   * The initial read hands each file's objects on as soon as the file is parsed (files are read
   * in order, so the first definition of an object is the first delivered; the merge after the
   * last file finds nothing more to deliver and reports the duplicates): the objects go into the
   * change tracker while they are young, not all held until the last file is read (at 10,000 ×
   * 10, 60 MiB of object graphs promoted and then collected).
   */
  #deliverRead(state: FileState): void {
    for (const o of state.objects) {
      if (this.#stopped) return;
      if ((o.kind === 'Node' && o.key !== this.#opts.nodeName) || this.#delivered.has(id(o))) continue;
      this.#delivered.set(id(o), o);
      this.#hand(o, o);
    }
  }

  /** All files' objects, first definition winning; Nodes other than ours dropped. */
  #merge(): Map<string, Held> {
    const merged = new Map<string, Held>();
    const duplicates = new Set<string>();
    const all = [...this.#files.values()].flatMap((f) => f.objects).sort(byLocation);
    for (const o of all) {
      if (o.kind === 'Node' && o.key !== this.#opts.nodeName) continue;
      const first = merged.get(id(o));
      if (!first) {
        merged.set(id(o), o);
        continue;
      }
      const error = { object: `${where(o)} ${o.kind} ${o.key}`, reason: `duplicate of ${where(first)}; ignored` };
      this.#reportNew(error, this.#duplicates, duplicates);
    }
    this.#duplicates = duplicates;
    return merged;
  }

  async #deliver(desired: Map<string, Held>, initial: boolean, scratch: Scratch): Promise<void> {
    const h = this.#handler!;
    let changes: Array<{ at: Held; value: Held | null }> = [];
    for (const [k, o] of desired) {
      const prev = this.#delivered.get(k);
      if (!prev || prev.sig !== o.sig) changes.push({ at: o, value: o });
    }
    for (const [k, o] of this.#delivered) if (!desired.has(k)) changes.push({ at: o, value: null });
    const lost = await this.#reread(changes.flatMap((c) => (c.value && !c.value.object ? [c.value] : [])), scratch);
    if (this.#stopped) return;
    // What the handler holds of those stays; the file's next change brings them.
    const reported = new Set<string>();
    for (const o of lost) {
      const prev = this.#delivered.get(id(o));
      if (prev) desired.set(id(o), prev);
      else desired.delete(id(o));
      const error = { object: `${where(o)} ${o.kind} ${o.key}`, reason: `now the first definition, but its file no longer reads as it did; ${prev ? `${where(prev)}'s version stays` : 'not applied'} until the file changes` };
      this.#reportNew(error, this.#lost, reported);
    }
    this.#lost = reported;
    if (lost.size > 0) changes = changes.filter((c) => !lost.has(c.at));
    changes.sort((a, b) => byLocation(a.at, b.at));
    this.#delivered = desired;
    for (const { at, value } of changes) this.#hand(at, value);
    for (const files of this.#files.values()) for (const o of files.objects) o.object = undefined;
    if (initial && !desired.has(`Node:${this.#opts.nodeName}`)) h.onNode(null);
    if (!initial && changes.length > 0) {
      const count = (f: (c: (typeof changes)[number]) => boolean): number => changes.filter(f).length;
      this.#opts.logger?.info({ changed: count((c) => c.value !== null), deleted: count((c) => c.value === null) }, 'manifests: changes delivered');
    }
  }

  /**
   * Gives objects read in an earlier round (a duplicate that now wins) their object again, from
   * their file read once more. Returns those that could not be: the file is no longer what was
   * read (it changed since, or it is broken and these are its last good state).
   */
  async #reread(held: Held[], scratch: Scratch): Promise<Set<Held>> {
    const lost = new Set<Held>();
    for (const file of new Set(held.map((o) => o.file))) {
      const wanted = held.filter((o) => o.file === file);
      const read = await readBounded(file, this.#opts.maxFileBytes, scratch);
      const state = this.#files.get(file);
      if (read instanceof Uint8Array && state?.digest === digest(read)) {
        const fresh = new Map(parseManifest(file, read).objects.map((o) => [`${where(o)} ${id(o)} ${o.sig}`, o.object]));
        for (const o of wanted) o.object = fresh.get(`${where(o)} ${id(o)} ${o.sig}`);
      }
      for (const o of wanted) if (!o.object) lost.add(o);
    }
    return lost;
  }

  /** One object (null: deleted) to the handler; it is then held as its digest only. */
  #hand(at: Located, value: Held | null): void {
    const h = this.#handler!;
    const object = value === null ? null : value.object!;
    if (value) value.object = undefined;
    if (at.kind === 'Service') h.onService(at.key, object as Service | null);
    else if (at.kind === 'EndpointSlice') h.onEndpointSlice(at.key, object as EndpointSlice | null);
    else h.onNode(object as Node | null);
  }

  /** Reports `error` unless it is in `before` (reported in the last round); records it in `now`. */
  #reportNew(error: ObjectError, before: ReadonlySet<string>, now: Set<string>): void {
    const text = `${error.object}: ${error.reason}`;
    now.add(text);
    if (!before.has(text)) this.#report(error);
  }

  #report(error: ObjectError): void {
    if (this.#stopped) return;
    this.#handler?.onError(error);
  }
}

/**
 * The buffer one round of reads shares: files are read one after another and each is parsed
 * before the next is read, so one allocation serves them all (each fresh buffer of a file's size
 * is memory the kernel must map anew).
 */
interface Scratch {
  buf: Buffer | undefined;
}

/**
 * A regular file's content, at most `max` bytes, in `scratch.buf` (valid until the next read
 * into it); a reason string when it cannot be used; undefined when it does not exist.
 * O_NONBLOCK: opening a FIFO must not hang the source.
 */
async function readBounded(file: string, max: number, scratch: Scratch): Promise<Buffer | string | undefined> {
  let fh;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') return undefined;
    return e.code === 'ELOOP' ? 'cannot read: a symlink loop (ELOOP)' : `cannot read: ${e.message}`;
  }
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      const st = await fh.stat();
      if (st.isDirectory()) return 'is a directory, not a manifest file';
      if (!st.isFile()) return 'not a regular file';
      if (st.size > max) return `too large: ${st.size} bytes, the limit is ${max}`;
      // One byte more than fstat said: a file that grew meanwhile is read again.
      if (!scratch.buf || scratch.buf.length < st.size + 1) scratch.buf = Buffer.allocUnsafe(Math.max(st.size + 1, Math.min(2 * (scratch.buf?.length ?? 0), max + 1)));
      const buf = scratch.buf.subarray(0, st.size + 1);
      let n = 0;
      for (let r; n < buf.length && (r = await fh.read(buf, n, buf.length - n, n)).bytesRead > 0; ) n += r.bytesRead;
      if (n < buf.length) return buf.subarray(0, n);
    }
    return 'cannot read: it keeps growing while being read';
  } catch (err) {
    return `cannot read: ${(err as Error).message}`;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

function id(o: Located): string {
  return [o.kind, o.key].join(':'); // one flat string: the map of delivered objects keeps it
}

function where(o: Located): string {
  return `${o.file}#${o.doc}${o.item >= 0 ? `.items[${o.item}]` : ''}`;
}

function byString(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function byLocation(a: Located, b: Located): number {
  return byString(a.file, b.file) || a.doc - b.doc || a.item - b.item || byString(id(a), id(b));
}
