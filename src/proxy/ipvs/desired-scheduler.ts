// The per-service scheduler annotations (ours and kube-router's alias) and their flags.
import { KNOWN_SCHEDULERS, NO_FLAGS, SERVICE_FLAGS, type ServiceFlag } from '../../kernel/ipvs/types.js';
import { SCHEDULER_ANNOTATIONS, SCHEDULER_FLAGS_ANNOTATION } from '../../model/k8s.js';

/** Scheduler flags the flags annotation may name. */
export const SCHEDULER_FLAG_NAMES = ['sh-fallback', 'sh-port', 'mh-fallback', 'mh-port'] as const;

/** What a Service's annotations ask for; `errors` are reasons (the Service must not be programmed). */
export interface SchedulerChoice {
  /** The annotated scheduler, or null for the configured default. */
  scheduler: string | null;
  flags: ServiceFlag[];
  errors: string[];
}

const KNOWN: ReadonlySet<string> = new Set(KNOWN_SCHEDULERS);
const FLAG_NAMES: ReadonlySet<string> = new Set(SCHEDULER_FLAG_NAMES);

/** Orders flags as SERVICE_FLAGS lists them, without duplicates. */
export function sortFlags(flags: Iterable<ServiceFlag>): ServiceFlag[] {
  const set = new Set(flags);
  return set.size > 0 ? SERVICE_FLAGS.filter((f) => set.has(f)) : NO_FLAGS;
}

/** Why `flags` cannot go with `scheduler` (sh-* need sh, mh-* need mh), or null when they can. */
export function schedulerFlagsError(scheduler: string, flags: readonly ServiceFlag[]): string | null {
  for (const f of flags) {
    const family = f.startsWith('sh-') ? 'sh' : f.startsWith('mh-') ? 'mh' : null;
    if (family !== null && family !== scheduler) {
      return `scheduler flag "${f}" needs scheduler ${family}, not ${scheduler} (annotation ${SCHEDULER_FLAGS_ANNOTATION})`;
    }
  }
  return null;
}

/**
 * Reads the scheduler annotations: the first of SCHEDULER_ANNOTATIONS that is set wins (ours
 * over kube-router's); the flags annotation is a comma-separated list. Unknown names are errors.
 */
export function schedulerFromAnnotations(annotations: Readonly<Record<string, string>>): SchedulerChoice {
  const errors: string[] = [];
  let scheduler: string | null = null;
  for (const name of SCHEDULER_ANNOTATIONS) {
    const value = annotations[name]?.trim();
    if (value === undefined || value === '') continue;
    if (KNOWN.has(value)) scheduler = value;
    else errors.push(`unknown scheduler ${JSON.stringify(value)} (annotation ${name})`);
    break;
  }
  const flags: ServiceFlag[] = [];
  for (const raw of (annotations[SCHEDULER_FLAGS_ANNOTATION] ?? '').split(',')) {
    const f = raw.trim();
    if (f === '') continue;
    if (FLAG_NAMES.has(f)) flags.push(f as ServiceFlag);
    else {
      errors.push(
        `unknown scheduler flag ${JSON.stringify(f)} (annotation ${SCHEDULER_FLAGS_ANNOTATION}; valid: ${SCHEDULER_FLAG_NAMES.join(', ')})`,
      );
    }
  }
  const sorted = sortFlags(flags);
  if (scheduler !== null) {
    const mismatch = schedulerFlagsError(scheduler, sorted);
    if (mismatch !== null) errors.push(mismatch);
  }
  return { scheduler, flags: sorted, errors };
}
