import { defineConfig } from 'vitest/config';

// Three projects, one per environment (see test/harness/run-all.mjs):
//   unit  - pure code and codec tests, any machine
//   netns - real host kernel (ipset, iptables, no IPVS), run inside a fresh network namespace
//   uml   - real IPVS kernel, run inside User-Mode Linux
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { test: { name: 'netns', include: ['test/kernel/netns/**/*.test.ts'], fileParallelism: false, testTimeout: 60_000 } },
      { test: { name: 'uml', include: ['test/kernel/uml/**/*.test.ts'], fileParallelism: false, testTimeout: 120_000, hookTimeout: 120_000 } },
    ],
  },
});
