// Runs async functions one after another. The queue keeps only "the previous one has settled",
// never its result: a chain kept as `run.catch(...)` holds the last result (a whole dump, the
// outcomes of a 33,000-op batch, an iptables-save text) for as long as the queue lives.

const settled = (): void => undefined;

export class SerialQueue {
  #tail: Promise<void> = Promise.resolve();

  /** Runs `fn` after everything queued before it has settled; its result or error is the caller's. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#tail.then(fn, fn);
    this.#tail = next.then(settled, settled);
    return next;
  }
}
