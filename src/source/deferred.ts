// A SourceHandler that holds what a source delivers until the real handler is attached, so the
// source can list while the daemon is still probing the kernel and building its proxier.
// Held objects are kept latest-per-key (a Service changed twice while held is handed on once,
// one added and deleted while held not at all);
// on attach they are replayed in order: Services, EndpointSlices, the Node, errors, onSynced.
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';
import type { SourceHandler } from './types.js';

/** Holds source calls until attach(); see the file comment. */
export class DeferredHandler implements SourceHandler {
  #target: SourceHandler | undefined;
  #services = new Map<string, Service>();
  #slices = new Map<string, EndpointSlice>();
  #node: { value: Node | null } | undefined;
  #errors: ObjectError[] = [];
  #synced = false;

  /** Replays what was held, then forwards every call to `target`. */
  attach(target: SourceHandler): void {
    if (this.#target) throw new Error('DeferredHandler: already attached');
    this.#target = target;
    for (const [key, s] of this.#services) target.onService(key, s);
    for (const [key, s] of this.#slices) target.onEndpointSlice(key, s);
    if (this.#node) target.onNode(this.#node.value);
    for (const e of this.#errors) target.onError(e);
    const synced = this.#synced;
    this.#services = new Map();
    this.#slices = new Map();
    this.#node = undefined;
    this.#errors = [];
    if (synced) target.onSynced();
  }

  onService(key: string, service: Service | null): void {
    if (this.#target) this.#target.onService(key, service);
    else if (service) this.#services.set(key, service);
    else this.#services.delete(key); // nothing was handed on yet
  }

  onEndpointSlice(key: string, slice: EndpointSlice | null): void {
    if (this.#target) this.#target.onEndpointSlice(key, slice);
    else if (slice) this.#slices.set(key, slice);
    else this.#slices.delete(key);
  }

  onNode(node: Node | null): void {
    if (this.#target) this.#target.onNode(node);
    else this.#node = { value: node };
  }

  onError(error: ObjectError): void {
    if (this.#target) this.#target.onError(error);
    else this.#errors.push(error);
  }

  onSynced(): void {
    if (this.#target) this.#target.onSynced();
    else this.#synced = true;
  }
}
