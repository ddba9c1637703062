// Where the API server is and how to authenticate to it, loaded without the weight of
// @kubernetes/client-node (it imports every generated model: ~0.4 s and ~75 MiB before any
// object). The common cases are read here: in-cluster (service-account token
// file, re-read as kubelet rotates it, and CA), and kubeconfig files with a token, token file,
// client certificate or basic auth. Anything else in the kubeconfig (exec plugins,
// auth-provider, proxy-url, impersonation) is handed to client-node's KubeConfig, imported
// only then (at the first request), whose applyToHTTPSOptions sets TLS, agent and headers.
import { readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { dirname, resolve } from 'node:path';

import { ipFamily } from '../config/net.js';
import { loadYaml } from '../yaml.js';

/** How to reach the API server; `apply` completes one request's options (TLS, agent, auth). */
export interface ClientConfig {
  /** The API server URL, without a trailing slash. */
  server: string;
  /** What handles the auth: `token`, `client-certificate`, `client-node` … (for logs). */
  auth: string;
  apply(opts: RequestOptions): Promise<void>;
  /** After a 401: credentials read from a file are read again at the next request. */
  refresh?(): void;
}

/** Where the config comes from (kube-proxy's --kubeconfig and --master). */
export interface ClientConfigOptions {
  kubeconfig?: string | undefined;
  master?: string | undefined;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How long a token read from a file is used before the file is read again (as client-go). */
const TOKEN_FILE_TTL_MS = 60_000;

/**
 * Loads the client config: the kubeconfig file, else in-cluster, else --master alone; --master
 * then overrides the server. Throws, naming the file and field, when there is nothing usable.
 */
export function loadClientConfig(opts: ClientConfigOptions, env: NodeJS.ProcessEnv = process.env): ClientConfig {
  if (opts.kubeconfig) return fromKubeconfig(opts.kubeconfig, opts.master);
  if (env.KUBERNETES_SERVICE_HOST) return inCluster(env, opts.master);
  if (opts.master) return make(opts.master, {}, null, 'none');
  throw new Error('no --kubeconfig, no --master, and not in a cluster (KUBERNETES_SERVICE_HOST unset)');
}

interface Tls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure?: boolean;
  servername?: string;
}

/** A header function; `refresh` drops what it cached (a token file's contents). */
type Header = (() => string | undefined) & { refresh?: () => void };

function make(server: string, tls: Tls, header: Header | null, auth: string): ClientConfig {
  const base = server.replace(/\/+$/, '');
  const https = base.startsWith('https:');
  return {
    server: base,
    auth,
    apply(o) {
      if (https) {
        if (tls.ca) o.ca = tls.ca;
        if (tls.cert) o.cert = tls.cert;
        if (tls.key) o.key = tls.key;
        if (tls.insecure) o.rejectUnauthorized = false;
        if (tls.servername) o.servername = tls.servername;
      }
      const value = header?.();
      if (value) o.headers = { ...(o.headers as Record<string, string> | undefined), authorization: value };
      return Promise.resolve();
    },
    refresh: () => header?.refresh?.(),
  };
}

function inCluster(env: NodeJS.ProcessEnv, master: string | undefined): ClientConfig {
  const host = env.KUBERNETES_SERVICE_HOST!;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
  const server = master ?? `${scheme}://${ipFamily(host) === 6 ? `[${host}]` : host}:${port}`;
  const ca = readOptional(`${SA_DIR}/ca.crt`);
  return make(server, ca ? { ca } : {}, bearerFromFile(`${SA_DIR}/token`), 'service-account token');
}

/**
 * `Bearer <token>` from a file, re-read at most once a minute and after a 401 (a rotated token);
 * a missing file sends no header.
 */
function bearerFromFile(path: string): Header {
  let cached: { value: string | undefined; at: number } | undefined;
  const header: Header = () => {
    if (!cached || Date.now() - cached.at > TOKEN_FILE_TTL_MS) {
      const token = readOptional(path)?.toString('utf8').trim();
      cached = { value: token ? `Bearer ${token}` : undefined, at: Date.now() };
    }
    return cached.value;
  };
  header.refresh = () => (cached = undefined);
  return header;
}

function readOptional(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
}

type Dict = Record<string, unknown>;

/** The user fields read here; any other set field sends the config to client-node. */
const SIMPLE_USER_FIELDS = new Set(['token', 'tokenFile', 'client-certificate', 'client-certificate-data', 'client-key', 'client-key-data', 'username', 'password']);
const SIMPLE_CLUSTER_FIELDS = new Set([
  'server',
  'certificate-authority',
  'certificate-authority-data',
  'insecure-skip-tls-verify',
  'tls-server-name',
  'extensions',
  'disable-compression',
]);

function fromKubeconfig(file: string, master: string | undefined): ClientConfig {
  const text = readFileSync(file, 'utf8');
  const doc = loadYaml(text, file, { schema: 'default', json: true }); // js-yaml's default schema, as client-node's KubeConfig
  if (!isDict(doc)) throw new Error(`kubeconfig ${file}: not a YAML mapping`);
  const current = doc['current-context'];
  if (typeof current !== 'string' || !current) throw new Error(`kubeconfig ${file}: current-context is not set`);
  const context = named(doc, 'contexts', 'context', current, file);
  const cluster = named(doc, 'clusters', 'cluster', String(context.cluster ?? ''), file);
  const user = context.user === undefined ? {} : named(doc, 'users', 'user', String(context.user), file);
  const server = master ?? cluster.server;
  if (typeof server !== 'string' || !server) throw new Error(`kubeconfig ${file}: cluster ${String(context.cluster)} has no server`);
  const simple = Object.keys(user).every((k) => SIMPLE_USER_FIELDS.has(k)) && Object.keys(cluster).every((k) => SIMPLE_CLUSTER_FIELDS.has(k));
  if (!simple) return viaClientNode(file, server, master);
  const dir = dirname(file);
  const data = (inline: string, path: string, what: string, fields: Dict): Buffer | undefined => {
    if (typeof fields[inline] === 'string') return Buffer.from(fields[inline], 'base64');
    if (typeof fields[path] !== 'string') return undefined;
    const p = resolve(dir, fields[path]);
    try {
      return readFileSync(p);
    } catch (e) {
      throw new Error(`kubeconfig ${file}: ${what} ${p}: ${(e as Error).message}`);
    }
  };
  const tls: Tls = {};
  const ca = data('certificate-authority-data', 'certificate-authority', 'certificate-authority', cluster);
  const cert = data('client-certificate-data', 'client-certificate', 'client-certificate', user);
  const key = data('client-key-data', 'client-key', 'client-key', user);
  if (ca) tls.ca = ca;
  if (cert) tls.cert = cert;
  if (key) tls.key = key;
  if (cluster['insecure-skip-tls-verify'] === true) tls.insecure = true;
  if (typeof cluster['tls-server-name'] === 'string') tls.servername = cluster['tls-server-name'];
  let header: Header | null = null;
  let auth = cert ? 'client-certificate' : 'none';
  if (typeof user.token === 'string' && user.token) {
    const value = `Bearer ${user.token}`;
    header = () => value;
    auth = 'token';
  } else if (typeof user.tokenFile === 'string') {
    header = bearerFromFile(resolve(dir, user.tokenFile));
    auth = 'token file';
  } else if (typeof user.username === 'string') {
    const value = `Basic ${Buffer.from(`${user.username}:${String(user.password ?? '')}`).toString('base64')}`;
    header = () => value;
    auth = 'basic';
  }
  return make(server, tls, header, auth);
}

/** The entry `name` of a kubeconfig list (`clusters`, `users`, `contexts`), its inner mapping. */
function named(doc: Dict, list: string, field: string, name: string, file: string): Dict {
  const items = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
  const item = items.find((i) => isDict(i) && i.name === name) as Dict | undefined;
  if (!item) throw new Error(`kubeconfig ${file}: ${list}: no entry named ${JSON.stringify(name)}`);
  const inner = item[field] ?? {};
  if (!isDict(inner)) throw new Error(`kubeconfig ${file}: ${list}[${JSON.stringify(name)}].${field}: not a mapping`);
  return inner;
}

function isDict(v: unknown): v is Dict {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** client-node's KubeConfig for what is not read here, imported at the first request. */
function viaClientNode(file: string, server: string, master: string | undefined): ClientConfig {
  let kc: Promise<{ applyToHTTPSOptions(o: RequestOptions): Promise<void> }> | undefined;
  return {
    server: server.replace(/\/+$/, ''),
    auth: 'client-node',
    apply: async (o) => (await (kc ??= clientNodeConfig(file, master))).applyToHTTPSOptions(o),
  };
}

async function clientNodeConfig(file: string, master: string | undefined): Promise<{ applyToHTTPSOptions(o: RequestOptions): Promise<void> }> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  const current = kc.getCurrentCluster()?.name;
  const clusters = kc.clusters.map((c) => {
    const server = c.name === current && master ? master : c.server;
    // NOTE: client-node refuses http:// servers unless skipTLSVerify is set (its config.js,
    // createAgent); there is no TLS to verify on plain HTTP, so allow it as client-go does.
    return { ...c, server, skipTLSVerify: c.skipTLSVerify || server.startsWith('http:') };
  });
  kc.loadFromOptions({ clusters, users: kc.users, contexts: kc.contexts, currentContext: kc.currentContext });
  return kc;
}
