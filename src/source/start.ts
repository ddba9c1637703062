// Starts the configured source before the daemon's other modules are loaded: the API server
// (or the manifests) is read while the daemon still loads, takes the node lock, probes the kernel
// and builds its proxier; what the source delivers meanwhile waits in a DeferredHandler, or goes
// into the change tracker the proxier will take over once that module is loaded. Reading
// changes nothing on the node, so the source starts before the node lock is taken (the daemon,
// under the lock, starts the iptables backend detection, which writes a probe chain).
// In API mode the daemon (not --once or --dry-run) resumes from the record the daemon before it
// left in the state directory (resume.ts): only the record's head is read before the watches go
// out; the change tracker is then loaded and restored while they are on their way
// (kubernetes.ts), and every delivery (deletions included) waits for that, so it lands on the
// restored model.
// The API source's modules are imported with this one, not on demand: the API path is the
// daemon's usual one, and each import() on the way to the first list request is one more wait
// for the module loader; --manifests loads them without using them.
import { hostname } from 'node:os';

import type { Config } from '../config.js';
import type { ChangeTracker } from '../proxy/changetracker.js';
import type { Logger } from '../log.js';
import { DeferredHandler } from './deferred.js';
import { KubernetesSource, KUBERNETES_SOURCE_BUILD } from './kubernetes.js';
import { STATE_DIR as stateDir, takeResume, writeResume, type Resume } from './resume.js';
import type { ProxySource } from './types.js';

/** A started source whose deliveries wait in `held` until the proxier attaches. */
export interface StartedSource {
  source: ProxySource;
  held: DeferredHandler;
  /** source.start(held): resolves after onSynced; awaited once the proxier is attached. */
  synced: Promise<void>;
  /** The change tracker `held` feeds (loaded after the first requests are out): the proxier's. */
  tracker: Promise<ChangeTracker>;
  /**
   * After source.stop(): leaves the resume record for the next daemon (the daemon in API mode,
   * once its caches had synced); a no-op otherwise.
   */
  leave(tracker: ChangeTracker): void;
}

/** The node name: --hostname-override, else the host name, lower-cased as kube-proxy does. */
export function nodeNameOf(config: Config): string {
  return (config.hostnameOverride ?? hostname()).trim().toLowerCase();
}

/** Entries taken between two turns of the event loop while a record is restored (the watches' I/O goes on). */
const RESTORE_CHUNK = 1_000;

/** Takes the record's model into `tracker`, a chunk of entries per turn of the event loop; rejects for a model of another tracker build. */
export async function restoreTracker(tracker: ChangeTracker, record: Resume): Promise<void> {
  const { TRACKER_BUILD } = await import('../proxy/changetracker.js');
  if (record.head.tracker.build !== TRACKER_BUILD) {
    record.close();
    throw new Error(`the change tracker's model was written by another build (${record.head.tracker.build})`);
  }
  const r = tracker.restore(record.head.tracker);
  let n = 0;
  for (const e of record.entries()) {
    r.add(e);
    if (++n % RESTORE_CHUNK === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  r.done();
}

/**
 * The API source; `resumable`: resuming from the record in the state directory if one fits (see
 * the file comment). `tracker()`: the change tracker, loaded and fed on the first call.
 */
function kubernetesSource(config: Config, nodeName: string, logger: Logger, resumable: boolean, tracker: () => Promise<ChangeTracker>) {
  const opts = { nodeName, logger, ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}), ...(config.master ? { master: config.master } : {}) };
  if (!resumable) return { source: new KubernetesSource(opts) };
  const taken = takeResume(stateDir, { build: KUBERNETES_SOURCE_BUILD, nodeName });
  if (taken !== null && 'rejected' in taken) logger.info({ reason: taken.rejected }, 'the resume record left by the stopped daemon is not used; listing');
  const record = taken !== null && 'record' in taken ? taken.record : null;
  // Only the head is read yet: the watches go out, then the tracker is loaded and the entries read.
  const resume = record ? { cursor: record.head, restore: async () => restoreTracker(await tracker(), record), discard: record.close } : undefined;
  const source: KubernetesSource = new KubernetesSource({ ...opts, ...(resume ? { resume } : {}) });
  const leave = (t: ChangeTracker): void => {
    const cursor = source.cursor();
    if (!cursor) return;
    const { head, entries } = t.snapshot();
    writeResume(stateDir, { build: KUBERNETES_SOURCE_BUILD, nodeName, ...cursor, tracker: head }, entries);
  };
  return { source, leave };
}

/**
 * Creates and starts the configured source; never rejects (a failed start rejects `synced`).
 * `resume`: the API source takes the resume record from the state directory and leaves one
 * (the daemon; not --dry-run).
 */
export async function startSource(config: Config, logger: Logger, { resume = false } = {}): Promise<StartedSource> {
  const nodeName = nodeNameOf(config);
  const held = new DeferredHandler();
  let loading: Promise<ChangeTracker> | undefined;
  const tracker = (): Promise<ChangeTracker> =>
    (loading ??= import('../proxy/changetracker.js').then(({ ChangeTracker }) => {
      const t = new ChangeTracker(nodeName);
      held.feed(t);
      return t;
    }));
  let source: ProxySource;
  let leave: StartedSource['leave'] = () => {};
  if (config.manifests) {
    const { ManifestSource } = await import('./manifests.js');
    source = new ManifestSource({ path: config.manifests, nodeName, logger });
  } else {
    const k = kubernetesSource(config, nodeName, logger, resume && !config.once && !config.dryRun, tracker);
    source = k.source;
    if (k.leave) leave = k.leave;
  }
  const synced = source.start(held);
  synced.catch(() => {}); // awaited by the daemon once the proxier can take the objects
  const loaded = tracker();
  loaded.catch(() => {}); // awaited by the daemon before it builds the proxier
  return { source, held, synced, tracker: loaded, leave };
}
