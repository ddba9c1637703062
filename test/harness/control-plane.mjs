// A real Kubernetes control plane for tests, benchmarks and the demo: etcd (data on a tmpfs),
// kube-apiserver (RBAC, ServiceAccount token issuer, dual-stack Service CIDRs, an admin client
// certificate) and kube-controller-manager (EndpointSlice, ServiceAccount and Service CIDR
// controllers). The binaries come from test/tools/build.mjs. There is no kubelet: `Api` creates
// Nodes and Pods and writes Pod status as kubelet would, and the real controller writes the
// EndpointSlices.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { ensureTools } from '../tools/build.mjs';

/** The Service CIDRs the API server allocates from (the first IP of each is the `kubernetes` Service). */
export const SERVICE_CIDRS = ['10.96.0.0/16', 'fd00:10:96::/112'];

/** Where the control plane listens unless told otherwise. */
const DEFAULTS = { address: '127.0.0.1', port: 6443, etcdPort: 2379 };

function openssl(args, cwd) {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, the API server's serving certificate, client certificates and the ServiceAccount key pair. */
function makePki(dir, address) {
  mkdirSync(dir, { recursive: true });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '3', '-subj', '/CN=kip-test-ca'], dir);
  const sans = [`IP:${address}`, 'IP:127.0.0.1', 'IP:10.96.0.1', 'IP:fd00:10:96::1', 'DNS:kubernetes', 'DNS:kubernetes.default', 'DNS:kubernetes.default.svc', 'DNS:localhost'];
  const sign = (name, subj, ext) => {
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj], dir);
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '3', '-extfile', `${name}.ext`], dir);
  };
  sign('apiserver', '/CN=kube-apiserver', `subjectAltName=${sans.join(',')}\nextendedKeyUsage=serverAuth\n`);
  sign('admin', '/O=system:masters/CN=kip-admin', 'extendedKeyUsage=clientAuth\n');
  // The controller manager acts for every controller it runs with this one identity.
  sign('kcm', '/O=system:masters/CN=system:kube-controller-manager', 'extendedKeyUsage=clientAuth\n');
  openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
}

/** A kubeconfig for `user` (client certificate files in `pki`). */
function kubeconfig(file, server, pki, user) {
  writeFileSync(file, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'kip',
    clusters: [{ name: 'kip', cluster: { server, 'certificate-authority': join(pki, 'ca.crt') } }],
    users: [{ name: user, user: { 'client-certificate': join(pki, `${user}.crt`), 'client-key': join(pki, `${user}.key`) } }],
    contexts: [{ name: 'kip', context: { cluster: 'kip', user } }],
  }));
}

/** One supervised process: its output goes to a log file; stop() ends it (SIGTERM, then SIGKILL). */
class Proc {
  constructor(name, file, args, logFile, env = process.env) {
    this.name = name;
    this.logFile = logFile;
    this.exited = null;
    const log = openSync(logFile, 'a');
    this.child = spawn(file, args, { stdio: ['ignore', log, log], env });
    closeSync(log);
    this.done = new Promise((res) => this.child.once('exit', (code, signal) => { this.exited = { code, signal }; res(); }));
  }

  /** The last lines of its log, for an error message. */
  tail(n = 15) {
    try { return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-n).join('\n'); } catch { return ''; }
  }

  async stop(timeoutMs = 10_000) {
    if (this.exited) return;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    await this.done;
    clearTimeout(t);
  }
}

/** A started control plane; see startControlPlane. */
export class ControlPlane {
  constructor(opts) {
    Object.assign(this, opts);
    this.server = `https://${this.address.includes(':') ? `[${this.address}]` : this.address}:${this.port}`;
    this.api = new Api(this.server, {
      ca: readFileSync(join(this.pki, 'ca.crt')),
      cert: readFileSync(join(this.pki, 'admin.crt')),
      key: readFileSync(join(this.pki, 'admin.key')),
    });
  }

  /** The cluster CA certificate (PEM), as a ServiceAccount's ca.crt. */
  caPem() {
    return readFileSync(join(this.pki, 'ca.crt'), 'utf8');
  }

  /** Starts kube-apiserver and waits for /readyz. */
  async startApiserver() {
    const args = [
      `--etcd-servers=http://127.0.0.1:${this.etcdPort}`,
      `--bind-address=${this.address}`, `--secure-port=${this.port}`, `--advertise-address=${this.address}`,
      `--tls-cert-file=${join(this.pki, 'apiserver.crt')}`, `--tls-private-key-file=${join(this.pki, 'apiserver.key')}`,
      `--client-ca-file=${join(this.pki, 'ca.crt')}`,
      '--authorization-mode=Node,RBAC',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${join(this.pki, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(this.pki, 'sa.key')}`,
      `--service-cluster-ip-range=${SERVICE_CIDRS.join(',')}`,
      '--service-node-port-range=30000-32767',
      '--allow-privileged=true',
      '--enable-priority-and-fairness=false',
      `--cert-dir=${join(this.dir, 'apiserver-certs')}`,
      ...this.apiserverArgs,
    ];
    this.apiserver = new Proc('kube-apiserver', this.tools['kube-apiserver'], args, join(this.dir, 'kube-apiserver.log'));
    await this.#waitReady(this.apiserver, '/readyz', this.readyTimeoutMs);
  }

  /** Stops kube-apiserver (etcd and the controller manager keep running). */
  async stopApiserver() {
    await this.apiserver?.stop();
  }

  /** Stops and starts kube-apiserver: what a daemon sees when the API server is upgraded. */
  async restartApiserver() {
    await this.stopApiserver();
    await this.startApiserver();
  }

  async #waitReady(proc, path, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.exited) throw new Error(`${proc.name} exited (${JSON.stringify(proc.exited)}):\n${proc.tail()}`);
      try {
        const r = await this.api.raw('GET', path);
        if (r.status === 200) return;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`${proc.name} not ready after ${timeoutMs} ms:\n${proc.tail()}`);
      await sleep(250);
    }
  }

  /** etcd's current revision (its v3 JSON gateway). */
  async etcdRevision() {
    const r = await etcdCall(this.etcdPort, '/v3/kv/range', { key: Buffer.from('/registry/').toString('base64'), limit: 1 });
    return r.header.revision;
  }

  /** Compacts etcd at its current revision: every older resourceVersion is gone. */
  async compact() {
    const revision = await this.etcdRevision();
    await etcdCall(this.etcdPort, '/v3/kv/compaction', { revision, physical: true });
    return revision;
  }

  /** Runs kubectl with the admin kubeconfig; returns its stdout. */
  kubectl(args, opts = {}) {
    return execFileSync(this.tools.kubectl, ['--kubeconfig', this.adminKubeconfig, ...args], { encoding: 'utf8', timeout: 60_000, ...opts });
  }

  /** Runs helm with the admin kubeconfig; returns its stdout. */
  helm(args, opts = {}) {
    return execFileSync(this.tools.helm, ['--kubeconfig', this.adminKubeconfig, ...args], {
      encoding: 'utf8', timeout: 120_000, ...opts,
      env: { ...process.env, HELM_CACHE_HOME: join(this.dir, 'helm/cache'), HELM_CONFIG_HOME: join(this.dir, 'helm/config'), HELM_DATA_HOME: join(this.dir, 'helm/data'), ...opts.env },
    });
  }

  /** Stops everything and removes its files. */
  async stop() {
    await this.kcm?.stop();
    await this.apiserver?.stop();
    await this.etcd?.stop();
    if (process.env.KIP_KEEP_CONTROL_PLANE !== '1') rmSync(this.dir, { recursive: true, force: true });
  }
}

function etcdCall(port, path, body) {
  return fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', body: JSON.stringify(body) }).then(async (r) => {
    const json = await r.json();
    if (!r.ok) throw new Error(`etcd ${path}: HTTP ${r.status}: ${JSON.stringify(json)}`);
    return json;
  });
}

/** A tmpfs-backed directory for etcd's data where one exists (/dev/shm), else the temp dir. */
function fastDir() {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

/**
 * Starts etcd, kube-apiserver and kube-controller-manager, building any missing binary first.
 * Options: address (the API server's bind and advertise address, default 127.0.0.1), port,
 * etcdPort, apiserverArgs / kcmArgs (extra flags), readyTimeoutMs. Resolves to a ControlPlane.
 */
export async function startControlPlane(opts = {}) {
  const tools = ensureTools(['etcd', 'kube-apiserver', 'kube-controller-manager', 'kubectl', 'helm']);
  const { address, port, etcdPort } = { ...DEFAULTS, ...opts };
  const dir = mkdtempSync(join(opts.dir ?? tmpdir(), 'kip-cp-'));
  const pki = join(dir, 'pki');
  makePki(pki, address);
  const cp = new ControlPlane({ dir, pki, tools, address, port, etcdPort, apiserverArgs: opts.apiserverArgs ?? [], readyTimeoutMs: opts.readyTimeoutMs ?? 120_000 });
  try {
    const data = mkdtempSync(join(fastDir(), 'kip-etcd-'));
    cp.etcdData = data;
    cp.etcd = new Proc('etcd', tools.etcd, [
      `--data-dir=${data}`, '--name=kip', `--listen-client-urls=http://127.0.0.1:${etcdPort}`, `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPort + 1}`, `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPort + 1}`,
      `--initial-cluster=kip=http://127.0.0.1:${etcdPort + 1}`, '--unsafe-no-fsync', '--log-level=warn',
    ], join(dir, 'etcd.log'));
    const etcdUp = Date.now() + 30_000;
    while (!(await etcdCall(etcdPort, '/v3/kv/range', { key: 'AA==' }).then(() => true, () => false))) {
      if (cp.etcd.exited || Date.now() > etcdUp) throw new Error(`etcd did not start:\n${cp.etcd.tail()}`);
      await sleep(100);
    }
    await cp.startApiserver();
    cp.adminKubeconfig = join(dir, 'admin.kubeconfig');
    kubeconfig(cp.adminKubeconfig, cp.server, pki, 'admin');
    const kcmKubeconfig = join(dir, 'kcm.kubeconfig');
    kubeconfig(kcmKubeconfig, cp.server, pki, 'kcm');
    cp.kcm = new Proc('kube-controller-manager', tools['kube-controller-manager'], [
      `--kubeconfig=${kcmKubeconfig}`, '--leader-elect=false', '--secure-port=0',
      '--controllers=endpointslice-controller,serviceaccount-controller,serviceaccount-token-controller,service-cidr-controller,garbage-collector-controller,namespace-controller',
      `--service-account-private-key-file=${join(pki, 'sa.key')}`, `--root-ca-file=${join(pki, 'ca.crt')}`,
      '--use-service-account-credentials=false',
      ...(opts.kcmArgs ?? []),
    ], join(dir, 'kube-controller-manager.log'));
    // Pods need their namespace's `default` ServiceAccount, which the controller manager creates.
    const saReady = Date.now() + 60_000;
    while ((await cp.api.raw('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status !== 200) {
      if (cp.kcm.exited || Date.now() > saReady) throw new Error(`kube-controller-manager did not create the default ServiceAccount:\n${cp.kcm.tail()}`);
      await sleep(200);
    }
    return cp;
  } catch (e) {
    await cp.stop();
    throw e;
  }
}

/** A small JSON client of the API server with the admin certificate. */
export class Api {
  constructor(server, tls) {
    this.server = server;
    this.tls = tls;
  }

  /** One request; resolves to { status, body (parsed when JSON) }. */
  raw(method, path, body, contentType = 'application/json') {
    const url = new URL(this.server + path);
    const data = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const headers = { accept: 'application/json', ...(data ? { 'content-type': contentType, 'content-length': String(data.length) } : {}) };
    return new Promise((resolve, reject) => {
      const req = request(url, { method, ...this.tls, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d) => (text += d)).on('end', () => {
          let parsed = text;
          try { parsed = JSON.parse(text); } catch { /* not JSON */ }
          resolve({ status: res.statusCode, body: parsed });
        });
      });
      req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  /** Like raw, but a status ≥ 300 (other than those in `ok`) throws with the Status message. */
  async call(method, path, body, { ok = [], contentType } = {}) {
    const r = await this.raw(method, path, body, contentType);
    if (r.status >= 300 && !ok.includes(r.status)) {
      throw new Error(`${method} ${path}: HTTP ${r.status}: ${typeof r.body === 'object' ? r.body.message : r.body}`);
    }
    return r.body;
  }

  /** Creates an object at its collection path (namespace from metadata); returns what the server stored. */
  create(obj) {
    return this.call('POST', collectionPath(obj), obj);
  }

  /** JSON merge patch of one object. */
  patch(obj, patch, subresource = '') {
    return this.call('PATCH', `${objectPath(obj)}${subresource ? `/${subresource}` : ''}`, patch, { contentType: 'application/merge-patch+json' });
  }

  /** Deletes one object; `gracePeriodSeconds` as kubectl delete --grace-period. 404 is fine. */
  delete(obj, gracePeriodSeconds) {
    const body = gracePeriodSeconds === undefined ? undefined : { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds };
    return this.call('DELETE', objectPath(obj), body, { ok: [404] });
  }

  /** GETs one object (null when absent). */
  async get(obj) {
    const r = await this.raw('GET', objectPath(obj));
    return r.status === 404 ? null : r.body;
  }

  /** GETs a list at `path` (e.g. `/apis/discovery.k8s.io/v1/namespaces/x/endpointslices?labelSelector=...`). */
  list(path) {
    return this.call('GET', path);
  }

  /** Creates a Node object with InternalIP addresses and optional zone. */
  createNode(name, { addresses = [], zone, labels = {} } = {}) {
    return this.create({
      apiVersion: 'v1', kind: 'Node',
      metadata: { name, labels: { 'kubernetes.io/hostname': name, ...(zone ? { 'topology.kubernetes.io/zone': zone } : {}), ...labels } },
      spec: {},
    }).then(() => this.patch({ apiVersion: 'v1', kind: 'Node', metadata: { name } }, {
      status: { addresses: [...addresses.map((a) => ({ type: 'InternalIP', address: a })), { type: 'Hostname', address: name }] },
    }, 'status'));
  }

  /**
   * Creates a Pod on `node` and, as kubelet would, writes its status: Running, its IPs and the
   * Ready condition (`ready`, default true).
   */
  async createPod(namespace, name, { node, ips, labels = {}, ports = [], ready = true }) {
    await this.create({
      apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, labels },
      spec: { nodeName: node, containers: [{ name: 'app', image: 'registry.invalid/app:1', ports }], terminationGracePeriodSeconds: 30 },
    });
    return this.setPodReady(namespace, name, ready, ips);
  }

  /** Writes a Pod's status as kubelet would (Running; Ready per `ready`). */
  setPodReady(namespace, name, ready, ips) {
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = {
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now },
        { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: now },
      ],
      ...(ips ? { podIP: ips[0], podIPs: ips.map((ip) => ({ ip })), hostIP: undefined } : {}),
    };
    return this.patch({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace, name } }, { status }, 'status');
  }

  /** Ensures a namespace exists. */
  async ensureNamespace(name) {
    await this.call('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, { ok: [409] });
  }

  /** A token for a ServiceAccount from the TokenRequest API. */
  async token(namespace, serviceAccount, expirationSeconds = 3600) {
    const r = await this.call('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`, {
      apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds },
    });
    return r.status.token;
  }
}

const CORE = new Set(['v1']);

/** The plural resource name of a kind (the kinds the tests use). */
function plural(kind) {
  const special = { Endpoints: 'endpoints', EndpointSlice: 'endpointslices', Service: 'services', Pod: 'pods', Node: 'nodes', Namespace: 'namespaces' };
  return special[kind] ?? `${kind.toLowerCase()}s`;
}

function collectionPath(obj) {
  const base = CORE.has(obj.apiVersion) ? `/api/${obj.apiVersion}` : `/apis/${obj.apiVersion}`;
  const ns = obj.metadata?.namespace;
  return `${base}${ns ? `/namespaces/${ns}` : ''}/${plural(obj.kind)}`;
}

function objectPath(obj) {
  return `${collectionPath(obj)}/${obj.metadata.name}`;
}
