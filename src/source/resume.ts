// The resume record: what a daemon stopping in API mode leaves in the state directory so that the
// next one (the next pod of a DaemonSet rollout) starts from it instead of listing every Service
// and EndpointSlice again: each informer's resourceVersion and delivered keys, the objects
// rejected, and the change tracker's model (ChangeTracker.snapshot()). The next daemon restores
// the tracker, watches from those resourceVersions (the watch brings what changed meanwhile) and
// syncs once the watches have caught up (kube-informer.ts, resume()).
// - Written at SIGTERM once the informers have stopped (nothing is delivered after that), so the
//   model is exactly the one at those resourceVersions; only after the caches had synced.
// - Taken by the next daemon, which removes the file as it reads it: a record is used once, and
//   a daemon that crashes leaves none behind.
// - Used only by the same build (the record names the bundle chunks of the tracker and the source,
//   whose file names carry their content hash: an upgraded daemon derives its model itself), for
//   the same node and API server, and when at most RESUME_MAX_AGE_MS old. A resourceVersion the
//   server no longer has costs a relist (410), never correctness: the relist delivers every object
//   again and deletes what is gone.
// - One JSON value per line: the head (the source's part, the tracker's head), then the tracker's
//   entries. The next daemon reads and parses the head only, sends its watches, and then reads
//   the entries a block and parses them a line at a time (each parsed value is garbage before the
//   next is parsed, and dies young: parsing the whole model at once promoted it all, twice its
//   size, out of V8's small young generation; reading the whole file first cost a 3.4 MiB string
//   at 3,000 × 10 and 0.5 s in UML before the first request).
import type { TrackerEntry, TrackerSnapshot } from '../proxy/changetracker.js';
import type { ObjectError } from '../model/service.js';
import { takeStateLines, writeStateLines } from '../state-dir.js';
import type { SourceKind } from './validate.js';

export { STATE_DIR } from '../state-dir.js';

export const RESUME_FILE = 'source-resume.jsonl';

/** Older records are not used: the API server has most likely compacted their resourceVersions. */
export const RESUME_MAX_AGE_MS = 10 * 60_000;

const FORMAT = 2;

/** The source's part: per kind the resourceVersion reached and the keys delivered, and the rejected objects. */
export interface SourceCursor {
  server: string;
  /** Kinds without one (e.g. a Node list that failed) are listed as usual. */
  informers: Partial<Record<SourceKind, string>>;
  delivered: Record<SourceKind, string[]>;
  rejected: Array<{ kind: SourceKind; key: string; error: ObjectError }>;
}

/** The record's first line. */
export interface ResumeHead extends SourceCursor {
  format: typeof FORMAT;
  build: string;
  nodeName: string;
  writtenAt: number;
  tracker: TrackerSnapshot;
}

/** The file name of the module `url` (a bundle chunk's name carries its content hash). */
export const moduleFile = (url: string): string => url.slice(url.lastIndexOf('/') + 1);

/** Writes the record (best effort, see state-dir.ts): the head, then one line per tracker entry. */
export function writeResume(dir: string, head: Omit<ResumeHead, 'format' | 'writtenAt'>, entries: Iterable<TrackerEntry>, now = Date.now()): void {
  function* lines(): Generator<string> {
    yield JSON.stringify({ format: FORMAT, writtenAt: now, ...head });
    for (const e of entries) yield JSON.stringify(e);
  }
  writeStateLines(dir, RESUME_FILE, lines());
}

/** A record taken: its head, and its tracker entries, read and parsed one by one as they are iterated. */
export interface Resume {
  head: ResumeHead;
  /** The entries; the file is closed at their end (or when the iteration stops). Once only. */
  entries(): Generator<TrackerEntry>;
  /** Closes the file without reading the entries (a record not used after all). */
  close(): void;
}

/**
 * Takes (removes, and reads the head of) the record: the record when it fits (`build`,
 * `nodeName`, age), else why not (for the log), or null when there is none. Only the head is read
 * here, so the watches can go out before the entries are: they are read from the taken file as
 * entries() is iterated. A line that is not JSON (a damaged file) throws from entries(), which
 * fails the restore (the source then lists).
 */
export function takeResume(dir: string, want: { build: string; nodeName: string }, now = Date.now()): { record: Resume } | { rejected: string } | null {
  const taken = takeStateLines(dir, RESUME_FILE);
  if (taken === null) return null;
  const lines = taken;
  const rejected = (why: string): { rejected: string } => (lines.close(), { rejected: why });
  let h: Partial<ResumeHead> | null = null;
  try {
    h = JSON.parse(lines.next() ?? 'null') as Partial<ResumeHead> | null;
  } catch {
    // not ours
  }
  if (h === null || typeof h !== 'object' || h.format !== FORMAT || typeof h.tracker !== 'object' || typeof h.server !== 'string' || typeof h.informers !== 'object' || typeof h.delivered !== 'object') {
    return rejected('not a resume record of this format');
  }
  if (h.build !== want.build) return rejected(`written by another build (${String(h.build)})`);
  if (h.nodeName !== want.nodeName) return rejected(`written for node ${String(h.nodeName)}`);
  const age = now - Number(h.writtenAt);
  if (!(age >= 0 && age <= RESUME_MAX_AGE_MS)) return rejected(`written ${Math.round(age / 1000)} s ago`);
  function* entries(): Generator<TrackerEntry> {
    try {
      for (let line = lines.next(); line !== null; line = lines.next()) if (line) yield JSON.parse(line) as TrackerEntry;
    } finally {
      lines.close();
    }
  }
  return { record: { head: h as ResumeHead, entries, close: lines.close } };
}
