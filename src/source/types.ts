// What a source of Services / EndpointSlices / the Node gives the proxy: the API server's
// informers (kubernetes.ts) and --manifests (manifests.ts) both implement ProxySource.
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';

/** Receives validated objects. `null` = the object was deleted. Keys are `namespace/name`. */
export interface SourceHandler {
  onService(key: string, service: Service | null): void;
  onEndpointSlice(key: string, slice: EndpointSlice | null): void;
  onNode(node: Node | null): void;
  /** An object (or file) was rejected: report it; what was delivered before it stays in force. */
  onError(error: ObjectError): void;
  /**
   * Called once the initial lists have been delivered (both caches synced); the proxy must not
   * sync before. Later relists (watch restarts, file changes) deliver only differences.
   */
  onSynced(): void;
  /**
   * Services and EndpointSlices went straight into the proxy's change tracker before this
   * handler was attached (DeferredHandler.feed): take them as if they had come through here.
   */
  onChanged?(): void;
}

/** A source of the objects the proxy serves. */
export interface ProxySource {
  /** Starts listing and watching; resolves once onSynced has been called. */
  start(handler: SourceHandler): Promise<void>;
  stop(): Promise<void>;
}
