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
import type { TrackerSnapshot } from '../proxy/changetracker.js';
import type { ObjectError } from '../model/service.js';
import { readStateFile, writeStateFile } from '../state-dir.js';

export { STATE_DIR } from '../state-dir.js';
import type { SourceKind } from './validate.js';

export const RESUME_FILE = 'source-resume.json';

/** Older records are not used: the API server has most likely compacted their resourceVersions. */
export const RESUME_MAX_AGE_MS = 10 * 60_000;

const FORMAT = 1;

/** The source's part: per kind the resourceVersion reached and the keys delivered, and the rejected objects. */
export interface SourceCursor {
  server: string;
  /** Kinds without one (e.g. a Node list that failed) are listed as usual. */
  informers: Partial<Record<SourceKind, string>>;
  delivered: Record<SourceKind, string[]>;
  rejected: Array<{ kind: SourceKind; key: string; error: ObjectError }>;
}

/** The record as written. */
export interface ResumeRecord extends SourceCursor {
  format: typeof FORMAT;
  build: string;
  nodeName: string;
  writtenAt: number;
  tracker: TrackerSnapshot;
}

/** The file name of the module `url` (a bundle chunk's name carries its content hash). */
export const moduleFile = (url: string): string => url.slice(url.lastIndexOf('/') + 1);

/** Writes the record (best effort, see state-dir.ts). */
export function writeResume(dir: string, record: Omit<ResumeRecord, 'format' | 'writtenAt'>, now = Date.now()): void {
  writeStateFile(dir, RESUME_FILE, { format: FORMAT, writtenAt: now, ...record });
}

/**
 * Takes (reads and removes) the record: the record when it fits (`build`, `nodeName`, age), else
 * why not (for the log), or null when there is none.
 */
export function takeResume(dir: string, want: { build: string; nodeName: string }, now = Date.now()): { record: ResumeRecord } | { rejected: string } | null {
  const r = readStateFile(dir, RESUME_FILE, { remove: true }) as Partial<ResumeRecord> | null;
  if (r === null) return null;
  if (typeof r !== 'object' || r.format !== FORMAT || typeof r.tracker !== 'object' || typeof r.server !== 'string' || typeof r.informers !== 'object' || typeof r.delivered !== 'object') {
    return { rejected: 'not a resume record of this format' };
  }
  if (r.build !== want.build) return { rejected: `written by another build (${String(r.build)})` };
  if (r.nodeName !== want.nodeName) return { rejected: `written for node ${String(r.nodeName)}` };
  const age = now - Number(r.writtenAt);
  if (!(age >= 0 && age <= RESUME_MAX_AGE_MS)) return { rejected: `written ${Math.round(age / 1000)} s ago` };
  return { record: r as ResumeRecord };
}
