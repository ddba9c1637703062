// GET requests to the API server over node:http/https with the auth of a ClientConfig: whole
// JSON bodies for list pages, newline-delimited JSON read line by line for watches.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';

import type { ClientConfig } from './kube-config.js';

/** An API request that failed with an HTTP status or a watch ERROR event (a Status object). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** True for 410 Gone: the resourceVersion (or continue token) is too old; list again. */
export function isGone(err: unknown): boolean {
  return err instanceof ApiError && err.status === 410;
}

/** One line for a failed request: `HTTP 403: <Status message>` or the error's first line. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) return `HTTP ${err.status}: ${err.message}`;
  const e = err as { message?: unknown } | null | undefined;
  return String(e?.message ?? err).split('\n')[0]!;
}

/** The members of a list object other than `items`, and whether `items` was an array. */
export interface ListHead {
  members: Record<string, unknown>;
  /** `items` was present and an array (its elements went to onItem). */
  hasItems: boolean;
}

/** Error bodies longer than this are cut (a Status is small). */
const MAX_ERROR_BODY = 64 * 1024;

/** An agent and the request function of one protocol. */
interface Transport {
  agent: HttpAgent;
  request: typeof httpRequest;
}

/** A client of one API server; close() drops its kept-alive connections. */
export class KubeHttp {
  readonly #config: ClientConfig;
  readonly #transport: Transport;

  constructor(config: ClientConfig) {
    this.#config = config;
    this.#transport = config.server.startsWith('https:')
      ? { agent: new HttpsAgent({ keepAlive: true }), request: httpsRequest }
      : { agent: new HttpAgent({ keepAlive: true }), request: httpRequest };
  }

  /** The server URL (for logs). */
  get server(): string {
    return this.#config.server;
  }

  /** GETs `path` (with its query); resolves with a 200 response, rejects with an ApiError otherwise. */
  async get(path: string, signal: AbortSignal): Promise<IncomingMessage> {
    const url = new URL(this.#config.server + path);
    const { agent, request } = this.#transport;
    const opts: RequestOptions = { method: 'GET', agent, signal, headers: { accept: 'application/json' } };
    await this.#config.apply(opts);
    signal.throwIfAborted();
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(url, opts, resolve);
      req.on('error', reject);
      req.end();
    });
    if (res.statusCode === 200) return res;
    if (res.statusCode === 401) this.#config.refresh?.();
    const body = await readBody(res, MAX_ERROR_BODY).catch(() => '');
    throw new ApiError(res.statusCode ?? 0, statusMessage(body) ?? (res.statusMessage || 'request failed'));
  }

  /**
   * GETs a list at `path` and hands each element of its `items` to `onItem`; resolves with the
   * list's other members. Rejects on a malformed or truncated body, or when onItem throws (the
   * items handed on before stay handed on). `beforeDecode` is awaited once the response has
   * arrived, before its body is read.
   */
  async getList(path: string, signal: AbortSignal, onItem: (item: unknown) => void, beforeDecode?: () => Promise<unknown>): Promise<ListHead> {
    const res = await this.get(path, signal);
    if (beforeDecode) {
      try {
        await beforeDecode();
      } catch (err) {
        res.destroy();
        throw err;
      }
    }
    const chunks: string[] = [];
    return consumeText(res, (chunk) => void chunks.push(chunk), () => splitList(chunks.join(''), onItem), 'response closed before its end');
  }

  /** Drops kept-alive and open connections. */
  close(): void {
    this.#transport.agent.destroy();
  }
}

/**
 * Reads newline-delimited JSON from a watch response, calling `onEvent` for each line as it
 * arrives; resolves when the stream ends, rejects on a stream error or when `onEvent` throws
 * (the response is then destroyed).
 */
export function readLines(res: IncomingMessage, onEvent: (event: unknown) => void): Promise<void> {
  let pending = '';
  const write = (chunk: string): void => {
    let start = 0;
    let nl: number;
    while ((nl = chunk.indexOf('\n', start)) >= 0) {
      const line = pending + chunk.slice(start, nl);
      pending = '';
      start = nl + 1;
      if (line.trim()) onEvent(JSON.parse(line));
    }
    pending += chunk.slice(start);
  };
  return consumeText(res, write, () => undefined, 'watch stream closed before its end');
}

/** A list body's items, each handed to `onItem`, and its other members; throws on a body that is not a JSON object. */
function splitList(text: string, onItem: (item: unknown) => void): ListHead {
  const list: unknown = JSON.parse(text);
  if (typeof list !== 'object' || list === null || Array.isArray(list)) throw new Error('list body: not a JSON object');
  const { items, ...members } = list as Record<string, unknown>;
  if (!Array.isArray(items)) return { members: list as Record<string, unknown>, hasItems: false };
  for (const item of items) onItem(item);
  return { members, hasItems: true };
}

/** The body as text, decoded chunk by chunk; at most about `max` characters kept. */
function readBody(res: IncomingMessage, max: number): Promise<string> {
  const chunks: string[] = [];
  let size = 0;
  const write = (c: string): void => {
    size += c.length;
    if (size <= max) chunks.push(c);
  };
  return consumeText(res, write, () => chunks.join(''), 'response closed before its end');
}

/**
 * Feeds a response's text to `write` chunk by chunk as it arrives and resolves with `end()` once
 * it has ended; rejects on a stream error, when it closes before its end (`closed`), or when
 * `write` or `end` throws (the response is then destroyed).
 */
function consumeText<T>(res: IncomingMessage, write: (chunk: string) => void, end: () => T, closed: string): Promise<T> {
  return new Promise((resolve, reject) => {
    let failed = false;
    const fail = (e: unknown): void => {
      if (failed) return;
      failed = true;
      res.destroy();
      reject(e);
    };
    const guard = (fn: () => void): void => {
      if (failed) return;
      try {
        fn();
      } catch (e) {
        fail(e);
      }
    };
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => guard(() => write(chunk)));
    res.on('end', () => guard(() => resolve(end())));
    res.on('error', fail);
    res.on('close', () => res.complete || fail(new Error(closed)));
  });
}

/** The `message` of a Status body, if it is one. */
function statusMessage(body: string): string | undefined {
  try {
    const s = JSON.parse(body) as { message?: unknown };
    return typeof s.message === 'string' ? s.message : undefined;
  } catch {
    return undefined;
  }
}
