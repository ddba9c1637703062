// A token file rotated under the daemon (kubelet writes new contents to the same path): the
// next request after a 401 reads the file again instead of sending the refused token until the
// one-minute re-read.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadClientConfig } from '../../src/source/kube-config.js';
import { ApiError, KubeHttp } from '../../src/source/kube-http.js';

let server: Server;
let url = '';
let accepted = 'Bearer new';
const seen: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'kip-token-'));

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? '');
    if (req.headers.authorization !== accepted) return void res.writeHead(401).end('{"kind":"Status","message":"Unauthorized"}');
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a rotated token file', () => {
  it('is read again after a 401, not a minute later', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'old\n');
    const kubeconfig = join(dir, 'config');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'k', cluster: { server: url } }],
      users: [{ name: 'u', user: { tokenFile } }],
      contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
    }));
    const http = new KubeHttp(loadClientConfig({ kubeconfig }));
    try {
      accepted = 'Bearer old';
      (await http.get('/api', AbortSignal.timeout(5000))).resume();
      writeFileSync(tokenFile, 'new\n');
      accepted = 'Bearer new'; // the old token is now refused
      await expect(http.get('/api', AbortSignal.timeout(5000))).rejects.toBeInstanceOf(ApiError);
      (await http.get('/api', AbortSignal.timeout(5000))).resume();
      expect(seen).toEqual(['Bearer old', 'Bearer old', 'Bearer new']);
    } finally {
      http.close();
    }
  });
});
