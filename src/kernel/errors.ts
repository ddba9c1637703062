// One error type for everything the kernel (or a malformed exchange with it) can say.
import type { z } from 'zod';

/** Fields of a NetlinkError, like Node's SystemError. */
export interface NetlinkErrorInit {
  code: string;
  errno: number;
  op: string;
  message?: string;
  extAck?: string;
  /** The object the op was about, e.g. `tcp/10.96.0.10:80`. */
  object?: string;
}

/** A kernel or netlink failure with a machine-readable shape: `{ code, errno, op, extAck? }`. */
export class NetlinkError extends Error {
  override readonly name = 'NetlinkError';
  readonly code: string;
  readonly errno: number;
  readonly op: string;
  readonly extAck?: string;
  readonly object?: string;

  constructor(init: NetlinkErrorInit) {
    const detail = init.extAck ? `: ${init.extAck}` : '';
    const about = init.object ? ` ${init.object}` : '';
    super(init.message ?? `${init.op}${about}: ${init.code}${detail}`);
    this.code = init.code;
    this.errno = init.errno;
    this.op = init.op;
    if (init.extAck) this.extAck = init.extAck;
    if (init.object) this.object = init.object;
  }
}

/** Input rejected before it reached the kernel; `field` names what was wrong. */
export class ValidationError extends Error {
  override readonly name = 'ValidationError';
  readonly code = 'ERR_INVALID_INPUT';
  constructor(
    readonly op: string,
    readonly field: string,
    reason: string,
  ) {
    super(`${op}: ${field}: ${reason}`);
  }
}

/**
 * Throws a ValidationError for the first issue `schema` finds in `value`, its field named
 * `what.<path>`; the clients call it for what their hand-written checks do not pass.
 */
export function checkWith(schema: { safeParse(value: unknown): z.ZodSafeParseResult<unknown> }, value: unknown, op: string, what: string): void {
  const r = schema.safeParse(value);
  if (r.success) return;
  const issue = r.error.issues[0]!;
  throw new ValidationError(op, [what, ...issue.path.map(String)].join('.'), issue.message);
}

interface ErrnoLike {
  code?: unknown;
  errno?: unknown;
  message?: unknown;
  syscall?: unknown;
}

/** Wraps an error thrown by the addon (SysError or codec error) into a NetlinkError for `op`. */
export function fromNative(op: string, e: unknown, object?: string): NetlinkError {
  if (e instanceof NetlinkError) return e;
  const x = (e ?? {}) as ErrnoLike;
  const init: NetlinkErrorInit = {
    op,
    code: typeof x.code === 'string' ? x.code : 'EIO',
    errno: typeof x.errno === 'number' ? x.errno : 0,
    message: `${op}${object ? ` ${object}` : ''}: ${typeof x.message === 'string' ? x.message : String(e)}`,
  };
  if (object) init.object = object;
  return new NetlinkError(init);
}

/** True for "already exists" answers: EEXIST, and ipset's IPSET_ERR_EXIST on add. */
export function isExist(e: unknown): boolean {
  return e instanceof NetlinkError && (e.code === 'EEXIST' || (e.code === 'IPSET_ERR_EXIST' && e.op !== 'ipset.del'));
}

/**
 * True for "no such object" answers: ENOENT and ESRCH (IPVS uses both), ENODEV, EADDRNOTAVAIL,
 * and ipset's IPSET_ERR_EXIST on delete (the entry is not in the set; a missing set is ENOENT).
 */
export function isNotFound(e: unknown): boolean {
  return (
    e instanceof NetlinkError &&
    (e.code === 'ENOENT' ||
      e.code === 'ESRCH' ||
      e.code === 'ENODEV' ||
      e.code === 'EADDRNOTAVAIL' ||
      (e.code === 'IPSET_ERR_EXIST' && e.op === 'ipset.del'))
  );
}
