// A stand-in for the Iptables driver in proxier tests: sync() records the spec as the kernel's
// owned rules, saveOwned() reads them back; `rules` can be changed to simulate drift.
import type { Iptables, TableSpec } from '../../../src/kernel/iptables.js';

/** The fake driver and what it saw. */
export interface FakeIptables {
  ipt: Iptables;
  /** iptables-restore runs. */
  restores: number;
  /** iptables-save runs (by saveOwned). */
  saves: number;
  /** The owned rules "in the kernel" (set to '' to simulate a deleted chain). */
  rules: string;
  /** The kernel's token (Iptables.generation()), moved by each sync(); null: none readable. */
  generation: number | null;
}

/** A fake Iptables driver; see the file comment. */
export function fakeIptables(): FakeIptables {
  const f: FakeIptables = {
    restores: 0,
    saves: 0,
    rules: '',
    generation: null,
    ipt: {
      sync: async (spec: TableSpec[]) => {
        f.restores++;
        f.rules = JSON.stringify(spec);
        if (f.generation !== null) f.generation++;
        return [];
      },
      generation: async () => (f.generation === null ? null : `gen:${f.generation}`),
      saveOwned: async () => {
        f.saves++;
        return { backend: 'legacy', nat: [f.rules], filter: [] };
      },
    } as unknown as Iptables,
  };
  return f;
}
