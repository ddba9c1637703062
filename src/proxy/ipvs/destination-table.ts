// The real servers the observed state holds for one virtual server, by destination id, in one
// array. A Map of ten real servers is a ~500-byte table plus ten id strings; this is the list
// alone, searched by comparing each server's address and port with the id (no string built).
// Past INDEX_AT servers a Map index is kept beside it, so a large Service's plan stays linear.
import { destinationId, type Destination, type DestinationKey } from '../../kernel/ipvs/types.js';

/** What the observed state and the plan need of a table of real servers (a Map<id, D> is one too). */
export interface DestinationMap<D extends Destination = Destination> {
  readonly size: number;
  get(id: string): D | undefined;
  has(id: string): boolean;
  set(id: string, d: D): this;
  delete(id: string): boolean;
  forEach(f: (d: D, id: string) => void): void;
  keys(): IterableIterator<string>;
  values(): IterableIterator<D>;
  [Symbol.iterator](): IterableIterator<[string, D]>;
}

/** Servers searched by scanning up to this many; a table that grows past it gets a Map index. */
const INDEX_AT = 16;

const COLON = 58;
const OPEN = 91;
const CLOSE = 93;

/** True when `id` is destinationId(d) (`a.b.c.d:port` or `[v6]:port`), without building it. */
export function isIdOf(d: DestinationKey, id: string): boolean {
  const a = d.address;
  let at = a.length;
  if (a.includes(':')) {
    if (id.charCodeAt(0) !== OPEN || !id.startsWith(a, 1) || id.charCodeAt(a.length + 1) !== CLOSE) return false;
    at += 2;
  } else if (!id.startsWith(a)) return false;
  if (id.charCodeAt(at) !== COLON || at + 1 >= id.length) return false;
  let port = 0;
  for (let i = at + 1; i < id.length; i++) {
    const c = id.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return false;
    port = port * 10 + c;
  }
  return port === d.port && (id.length - at - 1 === 1 || id.charCodeAt(at + 1) !== 48);
}

/** A DestinationMap in one array (see the file comment); insertion order as a Map's. */
export class DestinationTable<D extends Destination = Destination> implements DestinationMap<D> {
  #list: D[];
  #index: Map<string, D> | null = null;
  /** #list is another's (share()): copied before the first change. */
  #shared = false;

  /** A table of `list` (taken, not copied). */
  constructor(list: D[] = []) {
    this.#list = list;
    if (this.#list.length > INDEX_AT) this.#buildIndex();
  }

  #buildIndex(): void {
    this.#index = new Map(this.#list.map((d) => [destinationId(d), d]));
  }

  /**
   * Takes `list` as its own (and its order) when it holds exactly the same objects (after a sync
   * the observed real servers are the desired ones): one array for both, copied on change.
   */
  share(list: readonly D[]): void {
    const own = this.#list;
    if (own === list || own.length !== list.length) return;
    if (!own.every((d, i) => d === list[i])) {
      const theirs = new Set(list); // another order (a dump lists the newest first)
      if (!own.every((d) => theirs.has(d))) return;
    }
    this.#list = list as D[];
    this.#shared = true;
  }

  #own(): D[] {
    if (this.#shared) [this.#list, this.#shared] = [this.#list.slice(), false];
    return this.#list;
  }

  #at(id: string): number {
    const list = this.#list;
    if (this.#index !== null) {
      const d = this.#index.get(id);
      return d === undefined ? -1 : list.indexOf(d);
    }
    for (let i = 0; i < list.length; i++) if (isIdOf(list[i]!, id)) return i;
    return -1;
  }

  get size(): number {
    return this.#list.length;
  }

  get(id: string): D | undefined {
    if (this.#index !== null) return this.#index.get(id);
    const i = this.#at(id);
    return i < 0 ? undefined : this.#list[i];
  }

  has(id: string): boolean {
    return this.get(id) !== undefined;
  }

  set(id: string, d: D): this {
    const i = this.#at(id);
    if (i >= 0) this.#own()[i] = d;
    else this.#own().push(d);
    if (this.#index !== null) this.#index.set(id, d);
    else if (this.#list.length > INDEX_AT) this.#buildIndex();
    return this;
  }

  delete(id: string): boolean {
    const i = this.#at(id);
    if (i < 0) return false;
    this.#own().splice(i, 1);
    this.#index?.delete(id);
    return true;
  }

  forEach(f: (d: D, id: string) => void): void {
    for (const d of this.#list.slice()) f(d, destinationId(d));
  }

  *keys(): IterableIterator<string> {
    for (const d of this.#list) yield destinationId(d);
  }

  values(): IterableIterator<D> {
    return this.#list.values();
  }

  *[Symbol.iterator](): IterableIterator<[string, D]> {
    for (const d of this.#list) yield [destinationId(d), d];
  }
}
