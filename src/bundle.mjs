// The build's last step (`npm run bundle`, after tsc): dist/src's ES modules → dist/bin, what ships.
// esbuild bundles the CLI into an entry point and a few chunks (code splitting, which esbuild does
// for ES modules only), then each file is rewritten as CommonJS (dist/bin/package.json says so):
// node then starts the daemon without its ES module loader, which in UML put 0.1 s on every
// spawn → first list request (1.60 → 1.47 s, same boot, 15 rounds each; 5,140 → 5,006 page faults).
// - import() of a chunk or a built-in becomes require() after one turn of the event loop: an ES
//   import() lets I/O run while the module loads, and the start-up relies on it (the first list
//   requests go out while the addon and the daemon's own modules load: src/source/start.ts). Left
//   an import(), a built-in (node:https, for an https API server) would load the ES module loader
//   on the way to the first request. import() of a package (an ES one) is import.js's.
// - import.meta.url: the chunk's file URL. Every file is strict, as an ES module is.
import { chmodSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { build, transform } from 'esbuild';

const OUT = 'dist/bin';
const LOCAL_IMPORT = /\bimport\((["'])(\.\/chunk-[A-Z0-9]+\.js|node:[a-z_/]+)\1\)/g;
const PACKAGE_IMPORT = /\bimport\((["'])([^"'.][^"']*)\1\)/g;
const IMPORTER = 'import.js';
const PRELUDE = {
  require: 'var __importRequire = (p) => new Promise((r) => setImmediate(r)).then(() => require(p));',
  metaUrl: 'var __importMetaUrl = require("node:url").pathToFileURL(__filename).href;',
};

rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: { main: 'dist/src/cli.js' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir: OUT,
  chunkNames: 'chunk-[hash]',
  external: ['@kubernetes/client-node', 'pino'],
  sourcemap: 'inline',
  logLevel: 'warning',
});

let entryShebang = '';
for (const file of readdirSync(OUT).filter((f) => f.endsWith('.js'))) {
  const path = join(OUT, file);
  let code = readFileSync(path, 'utf8');
  const shebang = code.startsWith('#!') ? code.slice(0, code.indexOf('\n') + 1) : '';
  code = code
    .slice(shebang.length)
    .replace(LOCAL_IMPORT, (_, q, spec) => `__importRequire(${q}${spec}${q})`)
    .replace(PACKAGE_IMPORT, (_, q, spec) => `require("./${IMPORTER}")(${q}${spec}${q})`);
  const prelude = ['"use strict";'];
  if (code.includes('__importRequire(')) prelude.push(PRELUDE.require);
  if (code.includes('import.meta')) prelude.push(PRELUDE.metaUrl);
  const out = await transform(code, {
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcefile: file,
    sourcemap: 'external',
    define: { 'import.meta.url': '__importMetaUrl' },
    banner: prelude.join('\n'),
    logLevel: 'warning',
  });
  if (/\bimport\.meta\b/.test(out.code)) throw new Error(`${path}: import.meta left after the CommonJS rewrite`);
  if (shebang) entryShebang = shebang;
  writeFileSync(path, `${out.code}//# sourceMappingURL=${file}.map\n`);
  writeFileSync(`${path}.map`, out.map);
}
writeFileSync(join(OUT, 'package.json'), '{ "type": "commonjs" }\n');
writeFileSync(join(OUT, IMPORTER), '"use strict";\n// import() of a package, for the other files (src/bundle.mjs).\nmodule.exports = (specifier) => import(specifier);\n');

const ENTRY = 'cli.js';
writeFileSync(join(OUT, ENTRY), `${entryShebang}"use strict";\n// src/bundle.mjs writes this: the CLI (src/cli.ts).\nrequire("./main.js").runAsEntryPoint();\n`);
chmodSync(join(OUT, ENTRY), 0o755);
