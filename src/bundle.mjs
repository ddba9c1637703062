// The build's last step (`npm run bundle`, after tsc): esbuild bundles dist/src's ES modules into
// dist/bin, what ships: the entry point cli.js and the chunks the commands import on demand.
import { chmodSync, rmSync } from 'node:fs';

import { build } from 'esbuild';

const OUT = 'dist/bin';

rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: { cli: 'dist/src/cli.js' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir: OUT,
  chunkNames: 'chunk-[hash]',
  external: ['@kubernetes/client-node', 'pino'],
  // CommonJS packages bundled in require node's built-ins: each chunk gets a require.
  banner: { js: "import { createRequire as __kipCreateRequire } from 'node:module'; const require = __kipCreateRequire(import.meta.url);" },
  sourcemap: true,
  logLevel: 'warning',
});
chmodSync(`${OUT}/cli.js`, 0o755);
