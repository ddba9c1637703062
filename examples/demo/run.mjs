// `npm run demo`: boots User-Mode Linux over this machine's filesystem and runs demo.sh inside,
// so the demo never touches the host's own network namespace or rules.
import { fileURLToPath } from 'node:url';

import { runInUml } from '../../test/harness/uml.mjs';

const script = fileURLToPath(new URL('./demo.sh', import.meta.url));
const r = await runInUml({ command: ['sh', script], timeoutMs: 5 * 60_000 });
process.exitCode = r.code;
