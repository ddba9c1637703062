// The guard every kernel test file calls first (the detection lives in test/harness/isolation.mjs).
import { inFreshNetns, isUmlKernel } from '../../harness/isolation.mjs';

export { inFreshNetns, isUmlKernel };

/** True when this process runs inside the test harness's User-Mode Linux (KIP_IN_UML=1 and a UML kernel). */
export function inUml(): boolean {
  return process.env.KIP_IN_UML === '1' && isUmlKernel();
}

/**
 * Refuses to run a kernel test that could touch the host's own network namespace.
 * Call it at the top of every file under test/kernel/.
 */
export function assertIsolated(): void {
  if (process.env.KIP_IN_UML === '1' && !isUmlKernel()) {
    throw new Error('KIP_IN_UML=1 is set but this kernel is not User-Mode Linux (use `npm test`)');
  }
  if (!inUml() && !inFreshNetns()) {
    throw new Error('kernel tests must run in a fresh network namespace or in UML (use `npm test`)');
  }
}
