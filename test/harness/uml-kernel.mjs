#!/usr/bin/env node
// Installs the User-Mode Linux kernel the kernel tests boot, from Debian's packages, into a cache
// outside the checkout. Bookworm's user-mode-linux (6.1) and trixie's (6.12) cannot start a
// process on hosts whose CPUs have AMX ("ptrace set fp regs failed, errno = 14": they hand the
// host a fixed-size XSAVE buffer, and the host wants one with the AMX tile state), so this takes
// the newest Debian kernel (sid's package) and the C library it was linked against, unpacked
// side by side, with the kernel's ELF interpreter pointed at that library (patchelf).
// `node test/harness/uml-kernel.mjs` installs what is missing and prints the kernel's path.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SUITE = 'sid';
const PACKAGES = ['user-mode-linux', 'libc6'];

/** The cache folder: $KIP_UML_CACHE, else ~/.cache/kube-ipvs-proxy/uml. */
export const umlCache = () => process.env.KIP_UML_CACHE ?? join(homedir(), '.cache', 'kube-ipvs-proxy', 'uml');

/** The installed kernel and its modules folder, or null when not installed. */
export function installedUml(root = join(umlCache(), 'current')) {
  const kernel = join(root, 'linux.uml');
  const modules = join(root, 'root/usr/lib/uml/modules');
  return existsSync(kernel) && existsSync(modules) ? { kernel, modules } : null;
}

/** Downloads and unpacks the packages (apt with a private list of the one suite). */
export function installUml(log = (s) => process.stderr.write(`${s}\n`)) {
  const cache = umlCache();
  const found = installedUml();
  if (found) return found;
  for (const tool of ['apt-get', 'dpkg-deb', 'patchelf']) {
    try { execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }); } catch { throw new Error(`uml: ${tool} not found (apt-get install ${tool === 'patchelf' ? 'patchelf' : 'apt dpkg'})`); }
  }
  const apt = join(cache, 'apt');
  for (const d of ['lists/partial', 'cache/archives/partial', 'etc']) mkdirSync(join(apt, d), { recursive: true });
  writeFileSync(join(apt, 'etc/sources.list'), `deb http://deb.debian.org/debian ${SUITE} main\n`);
  const opts = [`-o`, `Dir::Etc::SourceList=${join(apt, 'etc/sources.list')}`, '-o', 'Dir::Etc::SourceParts=/dev/null',
    '-o', `Dir::State::Lists=${join(apt, 'lists')}`, '-o', `Dir::Cache=${join(apt, 'cache')}`, '-o', 'APT::Sandbox::User=root', '-qq'];
  log(`uml: downloading ${PACKAGES.join(', ')} from Debian ${SUITE} ...`);
  execFileSync('apt-get', [...opts, 'update'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const staging = join(cache, `staging-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  execFileSync('apt-get', [...opts, 'download', ...PACKAGES.map((p) => `${p}/${SUITE}`)], { cwd: staging, stdio: ['ignore', 'ignore', 'inherit'] });
  for (const deb of readdirSync(staging).filter((f) => f.endsWith('.deb'))) {
    execFileSync('dpkg-deb', ['-x', join(staging, deb), join(staging, 'root')]);
  }
  const version = readdirSync(join(staging, 'root/usr/lib/uml/modules'))[0];
  const dest = join(cache, version);
  rmSync(dest, { recursive: true, force: true });
  renameSync(staging, dest);
  const lib = join(dest, 'root/usr/lib/x86_64-linux-gnu');
  execFileSync('cp', [join(dest, 'root/usr/bin/linux.uml'), join(dest, 'linux.uml')]);
  execFileSync('patchelf', ['--set-interpreter', join(lib, 'ld-linux-x86-64.so.2'), '--set-rpath', lib, join(dest, 'linux.uml')]);
  rmSync(join(cache, 'current'), { force: true });
  execFileSync('ln', ['-s', version, join(cache, 'current')]);
  log(`uml: installed kernel ${version} in ${dest}`);
  return installedUml();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(installUml().kernel);
}
