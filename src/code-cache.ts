// V8 code cache for the shipped bundle (dist/bin). Without it V8 compiles each function the first
// time it runs (lazily), and each of those compiles reads the clock ~7 times for its timers: free
// on a host (vDSO), a system call where there is none (70 µs each in UML, where ~300 of our
// functions before the first list request made ~2,100 of the 4,300 clock_gettime calls before it).
//
// `npm run bundle` (src/bundle.mjs) writes `<file>.cache` beside the files of dist/bin that its
// training runs load: the CLI's start-up, once against an API server and once on manifests; a
// cache holds every function those runs compiled. dist/bin/cli.js installs the loader below
// before it requires anything else, and the loader compiles each file of its directory with its
// cache. V8 refuses a cache made by another V8 or under other V8 flags (the file is then compiled
// as usual); V8 itself checks only the source's length, so a cache also names the size and
// modification time (in seconds: what a container image keeps) of the file it was made from,
// and a file edited since is compiled as usual. Hashing the text instead cost more than the
// cache saved (its loop alone: ~700 page faults in UML, TurboFan's).
// `codeCacheStats()` counts the files that came from a cache (the daemon logs it when it starts).
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { dirname } from 'node:path';
import vm from 'node:vm';

/** What a file's cache is called: the file's name and this. */
export const CACHE_SUFFIX = '.cache';
/** Before V8's data: the size and the modification time (s) of the file the cache was made from. */
const HEADER = 8;
/** An import() call (`__importRequire(`, the bundle's, is none). */
const IMPORT_CALL = /\bimport\(/;

function fileStamp(file: string): [number, number] {
  const st = statSync(file);
  return [st.size, Math.floor(st.mtimeMs / 1000)];
}

/** The script node compiles for a CommonJS file: its wrapper function around the text. */
function wrapped(text: string): string {
  return Module.wrap(text.startsWith('#!') ? `//${text.slice(2)}` : text);
}

function writeCache(file: string, script: vm.Script): void {
  const header = Buffer.alloc(HEADER);
  const [size, mtime] = fileStamp(file);
  header.writeUInt32LE(size, 0);
  header.writeUInt32LE(mtime, 4);
  writeFileSync(file + CACHE_SUFFIX, Buffer.concat([header, script.createCachedData()]));
}

/** True when `cache` was made from `file` as it is now. */
function fits(cache: Buffer, file: string): boolean {
  if (cache.length <= HEADER) return false;
  const [size, mtime] = fileStamp(file);
  return cache.readUInt32LE(0) === size && cache.readUInt32LE(4) === mtime;
}

/** Files the loader compiled: `used` with their cache, `refused` with one that did not fit (stale, or another V8). */
export interface CodeCacheStats {
  used: number;
  refused: number;
}

let stats: CodeCacheStats | null = null;

/** The loader's counts; null when it is not installed (dist/src, tests, source maps on). */
export function codeCacheStats(): CodeCacheStats | null {
  return stats && { ...stats };
}

type Compile = (this: Module, text: string, filename: string) => unknown;
interface ModuleInternals {
  prototype: { _compile: Compile };
  _resolveFilename(request: string, parent: Module, isMain: boolean, options?: unknown): string;
  _cache: unknown;
  _extensions: unknown;
}

/**
 * From now on a CommonJS file in `dir` that has a cache is compiled with it. Not installed (false)
 * when node runs with source maps (node's own compile maps the stack traces). A file with an
 * import() is left to node: node 20's vm does not give one to such a script made with a cache
 * (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING), which is why src/bundle.mjs puts the bundle's in import.js.
 * `train` (dist/bin/cli.js: KUBE_IPVS_PROXY_CODE_CACHE_TRAIN=1, the build's training runs): every
 * other file of `dir` is compiled here (with its cache if it fits), and when the process exits
 * each one's cache is written anew: what it had, and every function compiled since.
 */
export function useCodeCache(dir: string, train = false): boolean {
  if (stats || (process as { sourceMapsEnabled?: boolean }).sourceMapsEnabled) return false;
  const counts: CodeCacheStats = (stats = { used: 0, refused: 0 });
  const M = Module as unknown as ModuleInternals;
  const compile = M.prototype._compile;
  const trained: [vm.Script, string][] = [];
  if (train) process.once('exit', () => trained.forEach(([script, file]) => writeCache(file, script)));
  M.prototype._compile = function (this: Module, text: string, filename: string) {
    if (dirname(filename) !== dir || IMPORT_CALL.test(text)) return compile.call(this, text, filename);
    let cache: Buffer | undefined;
    try {
      cache = readFileSync(filename + CACHE_SUFFIX);
    } catch {
      if (!train) return compile.call(this, text, filename);
    }
    if (cache && !fits(cache, filename)) {
      counts.refused++;
      cache = undefined;
    }
    if (!cache && !train) return compile.call(this, text, filename);
    const script = new vm.Script(wrapped(text), { filename, ...(cache ? { cachedData: cache.subarray(HEADER) } : {}) });
    if (cache) script.cachedDataRejected ? counts.refused++ : counts.used++;
    if (train) trained.push([script, filename]);
    const fn = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => unknown;
    const mod = this;
    const require = Object.assign((id: string): unknown => mod.require(id), {
      resolve: (request: string, options?: unknown) => M._resolveFilename(request, mod, false, options),
      main: (process as { mainModule?: unknown }).mainModule,
      cache: M._cache,
      extensions: M._extensions,
    });
    return fn.call(mod.exports, mod.exports, require, mod, filename, dir);
  };
  return true;
}
