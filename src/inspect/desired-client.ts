// Reads the daemon's desired state from its metrics server (GET /desired), for inspect.
import type { HostPort } from '../config/net.js';
import { DESIRED_PATH, DESIRED_VERSION, type DesiredStateDoc } from '../server/desired.js';

/** The URL of /desired on a metrics bind address; a wildcard host is reached over loopback. */
export function desiredUrl(bind: HostPort): string {
  const host = bind.host === '0.0.0.0' ? '127.0.0.1' : bind.host === '::' ? '::1' : bind.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${bind.port}${DESIRED_PATH}`;
}

/** GETs and checks the document; throws an error naming the URL and the reason. */
export async function fetchDesired(url: string, timeoutMs = 3000): Promise<DesiredStateDoc> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
  }
  const body = await res.text();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${body.trim()}`);
  let doc: Partial<DesiredStateDoc>;
  try {
    doc = JSON.parse(body) as Partial<DesiredStateDoc>;
  } catch {
    throw new Error(`${url}: not JSON`);
  }
  if (doc.kind !== 'DesiredState' || doc.version !== DESIRED_VERSION || !Array.isArray(doc.virtualServers)) {
    throw new Error(`${url}: not a version ${DESIRED_VERSION} DesiredState document`);
  }
  return doc as DesiredStateDoc;
}
