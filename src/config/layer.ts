// A Layer holds the values one source (the command line or the config file) sets, keyed by
// their dotted path in ConfigInput, each with the label that names it in error messages.

/** Where a value came from, to name it in messages: a flag, or a config-file field. */
export interface Origin {
  /** "--ipvs-scheduler", or "kube-proxy.yaml: ipvs.scheduler". */
  label: string;
  /** For lists from a file: report items as label[i]. */
  indexed?: boolean;
}

/** Values set by one source; a later layer overrides an earlier one key by key. */
export class Layer {
  readonly values = new Map<string, unknown>();
  readonly origins = new Map<string, Origin>();

  /** Sets (or replaces) one value. */
  set(path: string, value: unknown, origin: Origin): void {
    this.values.set(path, value);
    this.origins.set(path, origin);
  }

  /** Appends to a list value (repeated list flags accumulate). */
  append(path: string, items: readonly unknown[], origin: Origin): void {
    const prev = this.values.get(path);
    this.set(path, [...(Array.isArray(prev) ? prev : []), ...items], origin);
  }

  /** Moves a value to another path, keeping its origin. */
  move(from: string, to: string): void {
    if (!this.values.has(from)) return;
    this.set(to, this.values.get(from), this.origins.get(from)!);
    this.values.delete(from);
    this.origins.delete(from);
  }

  /** Copies every value of `other` over this layer's. */
  overlay(other: Layer): void {
    for (const [path, value] of other.values) this.set(path, value, other.origins.get(path)!);
  }

  /** The values as a nested object for ConfigSchema. */
  toInput(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [path, value] of this.values) {
      const keys = path.split('.');
      let node = out;
      for (const k of keys.slice(0, -1)) node = (node[k] ??= {}) as Record<string, unknown>;
      node[keys[keys.length - 1]!] = value;
    }
    return out;
  }

  /** Names the value at a zod issue path: the origin of its longest known prefix. */
  describe(issuePath: readonly PropertyKey[]): string | undefined {
    for (let n = issuePath.length; n > 0; n--) {
      const origin = this.origins.get(issuePath.slice(0, n).join('.'));
      if (origin === undefined) continue;
      const index = issuePath[n];
      return origin.indexed && typeof index === 'number' ? `${origin.label}[${index}]` : origin.label;
    }
    return undefined;
  }
}

/** An invalid configuration: every problem found, one per line, each naming its flag or field. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly issues: readonly string[]) {
    super(issues.join('\n'));
  }
}
