import { IptablesError } from './errors.js';
import type { Rule } from './types.js';

/** Kernel limit on a comment match's text: XT_MAX_COMMENT_LEN (256) includes the NUL. */
export const MAX_COMMENT_LENGTH = 255;

/** Kernel limit on a chain name: XT_EXTENSION_MAXNAMELEN (29) includes the NUL. */
export const MAX_CHAIN_NAME_LENGTH = 28;

// Bytes that may never reach a restore input: a newline would start a new command.
const CONTROL = /[\x00-\x1f\x7f]/;
// Tokens that need quotes: whitespace, quote and escape characters, '#' (comment lines).
const NEEDS_QUOTES = /[\s"'\\#]/;

/**
 * Makes an untrusted string (e.g. a Service or namespace name from the API) safe as the text
 * of `-m comment --comment`: every byte outside printable ASCII becomes `_`, leading `-` become
 * `_` (iptables-restore rejects tokens that look like `-t`), and the result is cut to
 * {@link MAX_COMMENT_LENGTH}. Quotes and backslashes are kept; {@link quoteToken} escapes them.
 */
export function sanitizeComment(text: string): string {
  let s = text.replace(/[^\x20-\x7e]/g, '_');
  s = s.replace(/^-+/, (m) => '_'.repeat(m.length));
  s = s.slice(0, MAX_COMMENT_LENGTH);
  return s === '' ? '_' : s;
}

/** The tokens of a comment match for untrusted text: `-m comment --comment <sanitised>`. */
export function comment(text: string): string[] {
  return ['-m', 'comment', '--comment', sanitizeComment(text)];
}

/**
 * Renders one argv token for iptables-restore: bare when harmless, else in double quotes with
 * `\` and `"` escaped (the inverse of iptables' add_param_to_argv). Control characters are
 * refused: they could never be part of a valid argument and a newline would inject a command.
 */
export function quoteToken(token: string): string {
  if (CONTROL.test(token)) {
    throw new IptablesError('EINVAL', `iptables token contains a control character: ${JSON.stringify(token)}`, {
      op: 'render',
    });
  }
  if (token !== '' && !NEEDS_QUOTES.test(token)) return token;
  return `"${token.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** Renders a restore command line such as `-A CHAIN <rule tokens>`. */
export function renderCommand(command: string, chain: string, rule: Rule): string {
  return [command, quoteToken(chain), ...rule.map(quoteToken)].join(' ');
}

/**
 * Splits one iptables-save / iptables-restore line into argv tokens with iptables' own rules:
 * whitespace separates, `"` opens a quoted token in which `\x` stands for `x`, and a closing
 * quote ends the token.
 */
export function tokenize(line: string): string[] {
  const out: string[] = [];
  let buf = '';
  let inToken = false;
  let quoted = false;
  let escaped = false;
  for (const c of line) {
    if (quoted) {
      if (escaped) {
        buf += c;
        escaped = false;
      } else if (c === '\\') {
        escaped = true;
      } else if (c === '"') {
        quoted = false;
        out.push(buf);
        buf = '';
        inToken = false;
      } else {
        buf += c;
      }
    } else if (c === '"') {
      quoted = true;
      inToken = true;
    } else if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inToken) out.push(buf);
      buf = '';
      inToken = false;
    } else {
      buf += c;
      inToken = true;
    }
  }
  if (quoted) throw new Error(`unterminated quote in ${JSON.stringify(line)}`);
  if (inToken) out.push(buf);
  return out;
}

// Options whose free-text value could look like `-j`.
const TEXT_OPTIONS = new Set(['--comment', '--log-prefix', '--nflog-prefix']);

/** The jump (`-j`) or goto (`-g`) target of a rule, if any. */
export function ruleTarget(rule: Rule): string | undefined {
  for (let i = 0; i < rule.length - 1; i++) {
    const t = rule[i] ?? '';
    if (TEXT_OPTIONS.has(t)) i++;
    else if (t === '-j' || t === '-g' || t === '--jump' || t === '--goto') return rule[i + 1];
  }
  return undefined;
}

/** True when `name` is a chain name we can declare: 1–28 printable chars, no quotes, `#` or leading `-`. */
export function validChainName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_CHAIN_NAME_LENGTH && !/^-|[^\x21-\x7e]|["'\\#]/.test(name);
}

/** Throws EINVAL unless {@link validChainName}. */
export function assertChainName(name: string): void {
  if (!validChainName(name)) {
    throw new IptablesError('EINVAL', `invalid chain name ${JSON.stringify(name)}`, { op: 'render' });
  }
}

/** True when two rules have the same tokens. */
export function sameRule(a: Rule, b: Rule): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}
