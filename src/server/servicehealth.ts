// Health-check node ports of externalTrafficPolicy: Local services, as kube-proxy's
// pkg/proxy/healthcheck/service_health.go: one HTTP listener per port and node address, 200
// while the service has local endpoints and the proxy is healthy, 503 otherwise. Each IP family
// is opened (and fails) on its own, as kube-proxy's per-family proxiers do: a port something else
// holds on an IPv6 address is reported for its Service while IPv4 clients are still answered.

import type { IncomingMessage, ServerResponse } from 'node:http';

import type { Config } from '../config.js';
import { ipFamily } from '../config/net.js';
import { cidrsOfFamily, familyOf, inCidr } from '../model/ip.js';
import type { ObjectError } from '../model/service.js';
import { HttpServer, send, type ListenError } from './health.js';

/** What one health-check node port reports: the service (`ns/name`) and its local endpoint count. */
export interface ServiceHealthTarget {
  service: string;
  localEndpoints: number;
}

/** A health-check port that could not be opened (an ObjectError); retried on the next sync. */
export interface ServiceHealthError extends ObjectError {
  /** `Service ns/name`. */
  object: string;
  /** `failed to start healthcheck on port N: <address>: <why>`. */
  reason: string;
  service: string;
  port: number;
  error: ListenError;
  /** kube-proxy's message: `node <hostname> failed to start healthcheck "ns/name" on port N: …`. */
  message: string;
}

/** Options of ServiceHealthServers. */
export interface ServiceHealthOptions {
  /** Addresses to listen on (none: no listener); absent = every address (kube-proxy with no --nodeport-addresses). */
  nodeAddresses?: readonly string[];
  /** The proxy's own health (ignoring node eligibility), reported as serviceProxyHealthy. */
  proxyHealth?: { isHealthy(): boolean };
  /** This node's name, for error messages. */
  hostname?: string;
}

/**
 * Where health-check node ports listen, as kube-proxy's service health server: with
 * --nodeport-addresses CIDRs of the primary IP family (IPv6 when --bind-address is IPv6), on the
 * local addresses in them; otherwise (none given, none of that family, `primary`) on every address.
 */
export function healthCheckAddresses(local: string[], wanted: Config['nodePortAddresses'], bindAddress: string | undefined): string[] | undefined {
  if (wanted.length === 0 || wanted[0] === 'primary') return undefined;
  const own = cidrsOfFamily(wanted, bindAddress && familyOf(bindAddress) === 'ipv6' ? 'ipv6' : 'ipv4');
  return own.length === 0 ? undefined : local.filter((a) => own.some((c) => inCidr(a, c)));
}

/** The addresses of one IP family, opened (or closed) together. */
interface Group {
  family: 4 | 6;
  hosts: string[];
  /** The wildcard family listeners of the default: `family` only (no IPv4 on the IPv6 socket). */
  exact: boolean;
}

interface Instance {
  target: ServiceHealthTarget;
  /** The listeners of each group that is open (by index into the groups). */
  open: Map<number, HttpServer[]>;
}

/** kube-proxy's exact body: tab-indented JSON, no trailing newline. */
export function serviceHealthBody(service: string, localEndpoints: number, proxyHealthy: boolean): string {
  const [namespace, name] = splitName(service);
  return [
    '{',
    '\t"service": {',
    `\t\t"namespace": ${JSON.stringify(namespace)},`,
    `\t\t"name": ${JSON.stringify(name)}`,
    '\t},',
    `\t"localEndpoints": ${localEndpoints},`,
    `\t"serviceProxyHealthy": ${proxyHealthy}`,
    '}',
  ].join('\n');
}

function splitName(service: string): [string, string] {
  const slash = service.indexOf('/');
  return slash < 0 ? ['', service] : [service.slice(0, slash), service.slice(slash + 1)];
}

/** The set of per-service health-check listeners; sync() makes it match the desired ports. */
export class ServiceHealthServers {
  readonly #groups: readonly Group[];
  readonly #proxyHealth: { isHealthy(): boolean } | undefined;
  readonly #hostname: string;
  readonly #instances = new Map<number, Instance>();
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: ServiceHealthOptions = {}) {
    const given = options.nodeAddresses;
    const ofFamily = (f: 4 | 6): string[] => (given ?? []).filter((a) => (ipFamily(a) === 6 ? 6 : 4) === f);
    this.#groups = given
      ? ([4, 6] as const).map((family) => ({ family, hosts: ofFamily(family), exact: false })).filter((g) => g.hosts.length > 0)
      : [{ family: 4, hosts: ['0.0.0.0'], exact: true }, { family: 6, hosts: ['::'], exact: true }];
    this.#proxyHealth = options.proxyHealth;
    this.#hostname = options.hostname ?? '';
  }

  /**
   * Opens listeners for new ports, closes those no longer wanted and updates the counts of
   * the rest (a port that changes service keeps its listener). Resolves with the ports that
   * failed to open; every other service is served. Calls run one at a time, in order.
   */
  sync(desired: ReadonlyMap<number, ServiceHealthTarget>): Promise<ServiceHealthError[]> {
    const run = this.#queue.then(() => this.#sync(desired));
    this.#queue = run.catch(() => {});
    return run;
  }

  /** The ports being served (on at least one family), ascending. */
  ports(): number[] {
    return [...this.#instances].filter(([, i]) => i.open.size > 0).map(([port]) => port).sort((a, b) => a - b);
  }

  /** What a served port currently reports, or undefined. */
  target(port: number): ServiceHealthTarget | undefined {
    const t = this.#instances.get(port)?.target;
    return t && { ...t };
  }

  /** Closes every listener. */
  close(): Promise<void> {
    return this.sync(new Map()).then(() => {});
  }

  async #sync(desired: ReadonlyMap<number, ServiceHealthTarget>): Promise<ServiceHealthError[]> {
    const closing: Promise<void>[] = [];
    for (const [port, inst] of this.#instances) {
      if (desired.has(port)) continue;
      this.#instances.delete(port);
      for (const servers of inst.open.values()) closing.push(...servers.map((s) => s.stop()));
    }
    await Promise.all(closing);

    const opening: Promise<ServiceHealthError | null>[] = [];
    for (const [port, target] of desired) {
      let inst = this.#instances.get(port);
      if (inst) inst.target = { ...target };
      else this.#instances.set(port, (inst = { target: { ...target }, open: new Map() }));
      // A family that could not be opened is tried again on every sync (and reported while it fails).
      this.#groups.forEach((group, g) => inst.open.has(g) || opening.push(this.#open(port, inst, g, group)));
    }
    return (await Promise.all(opening)).filter((e): e is ServiceHealthError => e !== null);
  }

  async #open(port: number, inst: Instance, g: number, group: Group): Promise<ServiceHealthError | null> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.#answer(inst, req, res);
    const servers: HttpServer[] = [];
    try {
      for (const host of group.hosts) {
        const server = new HttpServer('healthcheck', { host, port }, handler, undefined, group.exact ? group.family : undefined);
        await server.start();
        servers.push(server);
      }
    } catch (err) {
      // As kube-proxy: close what this family opened so the next sync can retry it whole.
      await Promise.all(servers.map((s) => s.stop()));
      const error = err as ListenError;
      // A node without IPv6 (no IPv6 sockets at all) has no IPv6 health-check port to open.
      if (group.exact && group.family === 6 && error.code === 'EAFNOSUPPORT') return null;
      const why = `${error.bindAddress}: ${error.reason}`;
      const node = this.#hostname ? `node ${this.#hostname} ` : '';
      const { service } = inst.target;
      return {
        object: `Service ${service}`,
        reason: `failed to start healthcheck on port ${port}: ${why}`,
        service,
        port,
        error,
        message: `${node}failed to start healthcheck ${JSON.stringify(service)} on port ${port}: ${why}`,
      };
    }
    inst.open.set(g, servers);
    return null;
  }

  #answer(inst: Instance, _req: IncomingMessage, res: ServerResponse): void {
    const { service, localEndpoints } = inst.target;
    const proxyHealthy = this.#proxyHealth?.isHealthy() ?? true;
    const code = localEndpoints !== 0 && proxyHealthy ? 200 : 503;
    send(res, code, 'application/json', serviceHealthBody(service, localEndpoints, proxyHealthy), {
      'X-Load-Balancing-Endpoint-Weight': String(localEndpoints),
    });
  }
}
