// Starts the configured source before the daemon's other modules are loaded: the API server
// (or the manifests) is read while the daemon still loads, takes the node lock, probes the kernel
// and builds its proxier; what the source delivers meanwhile waits in a DeferredHandler, or goes
// into the change tracker the proxier will take over once that module is loaded. Reading
// changes nothing on the node, so the source starts before the node lock is taken (the daemon,
// under the lock, starts the iptables backend detection, which writes a probe chain).
import { hostname } from 'node:os';

import type { Config } from '../config.js';
import type { ChangeTracker } from '../proxy/changetracker.js';
import type { Logger } from '../log.js';
import { DeferredHandler } from './deferred.js';
import type { ProxySource } from './types.js';

/** A started source whose deliveries wait in `held` until the proxier attaches. */
export interface StartedSource {
  source: ProxySource;
  held: DeferredHandler;
  /** source.start(held): resolves after onSynced; awaited once the proxier is attached. */
  synced: Promise<void>;
  /** The change tracker `held` feeds (loaded after the first requests are out): the proxier's. */
  tracker: Promise<ChangeTracker>;
}

/** The node name: --hostname-override, else the host name, lower-cased as kube-proxy does. */
export function nodeNameOf(config: Config): string {
  return (config.hostnameOverride ?? hostname()).trim().toLowerCase();
}

/** The source of objects; only the chosen one is loaded. */
async function sourceFor(config: Config, nodeName: string, logger: Logger): Promise<ProxySource> {
  if (config.manifests) {
    const { ManifestSource } = await import('./manifests.js');
    return new ManifestSource({ path: config.manifests, nodeName, logger });
  }
  const { KubernetesSource } = await import('./kubernetes.js');
  return new KubernetesSource({
    nodeName,
    logger,
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.master ? { master: config.master } : {}),
  });
}

/** Creates and starts the configured source; never rejects (a failed start rejects `synced`). */
export async function startSource(config: Config, logger: Logger): Promise<StartedSource> {
  const nodeName = nodeNameOf(config);
  const source = await sourceFor(config, nodeName, logger);
  const held = new DeferredHandler();
  const synced = source.start(held);
  synced.catch(() => {}); // awaited by the daemon once the proxier can take the objects
  const tracker = import('../proxy/changetracker.js').then(({ ChangeTracker }) => {
    const t = new ChangeTracker(nodeName);
    held.feed(t);
    return t;
  });
  tracker.catch(() => {}); // awaited by the daemon before it builds the proxier
  // The addon once the first requests are on their way: loading it tunes glibc's malloc for the
  // bursts of the initial lists (tuneMalloc in native/addon.cc).
  await import('../native/binding.js');
  return { source, held, synced, tracker };
}
