import { describe, expect, it } from 'vitest';

import { native } from '../../src/native/binding.js';
import { SerialQueue } from '../../src/serial.js';

describe('SerialQueue', () => {
  it('runs one at a time, in order, and passes results and errors to each caller', async () => {
    const q = new SerialQueue();
    const log: string[] = [];
    const step = (name: string, fail = false) => async () => {
      log.push(`start ${name}`);
      await new Promise((r) => setTimeout(r, 5));
      log.push(`end ${name}`);
      if (fail) throw new Error(name);
      return name;
    };
    const a = q.run(step('a'));
    const b = q.run(step('b', true));
    const c = q.run(step('c'));
    await expect(a).resolves.toBe('a');
    await expect(b).rejects.toThrow('b');
    await expect(c).resolves.toBe('c');
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('keeps no reference to the last result once it has settled', async () => {
    const q = new SerialQueue();
    let ref: WeakRef<object> | undefined;
    await q.run(async () => {
      const big = { payload: new Array(1000).fill(1) };
      ref = new WeakRef(big);
      return big;
    });
    await new Promise((r) => setTimeout(r, 0));
    native.releaseMemory(true); // a full, blocking GC
    expect(ref!.deref()).toBeUndefined();
  });
});
