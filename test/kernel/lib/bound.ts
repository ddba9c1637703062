// The Service IPs bound through a dummy link, read with iproute2 as an operator would: the local
// routes the daemon adds by default (`ip route show table local dev kube-ipvs0 proto 107`,
// --ipvs-address-binding=route) and the link's addresses (=address, and kube-proxy), as "IP/len".
import { execFileSync } from 'node:child_process';

import { LOCAL_ROUTE_PROTOCOL } from '../../../src/kernel/link/codec.js';

const run = (args: string[]): string => {
  try {
    return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch {
    return ''; // no such link
  }
};

/** "IP/32" and "IP/128" of the local routes the daemon adds through `dev`, sorted ([] when the link is missing). */
export function boundRoutes(dev = 'kube-ipvs0'): string[] {
  return (['-4', '-6'] as const).flatMap((f) =>
    run([f, '-o', 'route', 'show', 'table', 'local', 'dev', dev, 'proto', String(LOCAL_ROUTE_PROTOCOL)])
      .split('\n')
      .map((l) => /^local (\S+)/.exec(l)?.[1])
      .filter((a): a is string => a !== undefined)
      .map((a) => (a.includes('/') ? a : `${a}/${f === '-4' ? 32 : 128}`)),
  ).sort();
}

/** "IP/len" of the link's addresses but IPv6 link-local (the kernel's own on an up link), sorted. */
export function boundAddresses(dev = 'kube-ipvs0'): string[] {
  return run(['-o', 'addr', 'show', 'dev', dev])
    .split('\n')
    .map((l) => l.split(/\s+/)[3])
    .filter((a): a is string => a !== undefined && !a.startsWith('fe80:'))
    .sort();
}
