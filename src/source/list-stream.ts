// Splits a list response (`{"kind":…,"metadata":{…},"items":[{…},{…},…]}`) as its text arrives:
// each element of the top-level `items` array is parsed alone, from its own text, and handed on
// at once; the other top-level members are parsed and kept. No page-sized string or object graph
// is ever built, and each raw item dies young (it is garbage once decoded into the compact
// form), instead of a whole page of them outliving a young-generation GC and being promoted.
// It only finds where values start and end (strings, escapes, nesting); JSON.parse still
// checks every value, and a body cut short or unbalanced is an error.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The members of the list object other than `items`, and whether `items` was an array. */
export interface ListHead {
  members: Record<string, unknown>;
  /** `items` was present and an array (its elements went to onItem). */
  hasItems: boolean;
}

/** Where the scanner is in the list object (depth 1) and its `items` array (depth 2). */
const enum At {
  Start,
  KeyOrEnd,
  Key,
  Colon,
  Value,
  MemberEnd,
  ItemOrEnd,
  Item,
  ItemEnd,
  Done,
}

/** A JSON list body fed in chunks; see the file comment. */
export class ListSplitter {
  readonly #onItem: (item: unknown) => void;
  readonly #members: Record<string, unknown> = {};
  #hasItems = false;
  #at = At.Start;
  /** Containers open before the current character. */
  #depth = 0;
  #inString = false;
  /** The next character of the string is escaped (a backslash ended the previous chunk). */
  #escaped = false;
  /** The member name being read: its raw text from earlier chunks (undefined: not reading one). */
  #keyParts: string[] | undefined;
  #key = '';
  /** The value being captured: the depth it sits at (-1: none), and its text from earlier chunks. */
  #captureDepth = -1;
  #parts: string[] = [];

  constructor(onItem: (item: unknown) => void) {
    this.#onItem = onItem;
  }

  /** Feeds the next chunk of text; throws on a malformed body or when onItem throws. */
  write(chunk: string): void {
    const n = chunk.length;
    let i = 0;
    let captureFrom = this.#captureDepth >= 0 ? 0 : -1;
    let keyFrom = this.#keyParts ? 0 : -1;
    while (i < n) {
      if (this.#inString) {
        if (this.#escaped) {
          this.#escaped = false;
          i++;
          continue;
        }
        const from = i;
        let q = chunk.indexOf('"', i);
        // A quote preceded by an odd run of backslashes is escaped: look further.
        while (q >= 0 && oddBackslashesBefore(chunk, q, from)) q = chunk.indexOf('"', q + 1);
        if (q < 0) {
          this.#escaped = oddBackslashesBefore(chunk, n, from);
          break;
        }
        this.#inString = false;
        if (keyFrom >= 0) {
          const raw = this.#keyParts!.join('') + chunk.slice(keyFrom, q);
          this.#key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
          this.#keyParts = undefined;
          keyFrom = -1;
          this.#at = At.Colon;
        }
        i = q + 1;
        continue;
      }
      const c = chunk.charCodeAt(i);
      if (isSpace(c)) {
        i++;
        continue;
      }
      if (this.#captureDepth >= 0) {
        if (this.#depth > this.#captureDepth || (c !== COMMA && c !== CLOSE_BRACE && c !== CLOSE_BRACKET)) {
          if (c === QUOTE) this.#inString = true;
          else if (c === OPEN_BRACE || c === OPEN_BRACKET) this.#depth++;
          else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) this.#depth--;
          i++;
          continue;
        }
        // A ',' or closer at the value's own depth ends it; the character is then structural.
        this.#endCapture(chunk.slice(captureFrom, i));
        captureFrom = -1;
      }
      switch (this.#at) {
        case At.Start:
          if (c !== OPEN_BRACE) throw new Error('list body: not a JSON object');
          this.#enter(At.KeyOrEnd);
          break;
        case At.KeyOrEnd:
        case At.Key:
          if (c === CLOSE_BRACE && this.#at === At.KeyOrEnd) {
            this.#leave(At.Done);
            break;
          }
          if (c !== QUOTE) throw new Error('list body: expected a member name');
          this.#inString = true;
          this.#keyParts = [];
          keyFrom = i + 1;
          break;
        case At.Colon:
          if (c !== COLON) throw new Error("list body: expected ':'");
          this.#at = At.Value;
          break;
        case At.Value:
        case At.ItemOrEnd:
        case At.Item:
          if (this.#at === At.Value && this.#key === 'items' && c === OPEN_BRACKET) {
            this.#hasItems = true;
            this.#enter(At.ItemOrEnd);
            break;
          }
          if (c === CLOSE_BRACKET && this.#at === At.ItemOrEnd) {
            this.#leave(At.MemberEnd);
            break;
          }
          if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c === COLON) throw new Error('list body: expected a value');
          this.#captureDepth = this.#depth;
          captureFrom = i;
          continue; // the value's first character is read as part of it
        case At.MemberEnd:
          if (c === COMMA) this.#at = At.Key;
          else if (c === CLOSE_BRACE) this.#leave(At.Done);
          else throw new Error("list body: expected ',' or '}'");
          break;
        case At.ItemEnd:
          if (c === COMMA) this.#at = At.Item;
          else if (c === CLOSE_BRACKET) this.#leave(At.MemberEnd);
          else throw new Error("list body: expected ',' or ']'");
          break;
        case At.Done:
          throw new Error('list body: text after the end');
      }
      i++;
    }
    if (captureFrom >= 0) this.#parts.push(chunk.slice(captureFrom));
    if (keyFrom >= 0) this.#keyParts!.push(chunk.slice(keyFrom));
  }

  /** Ends the body: the members other than items; throws if the body was cut short. */
  end(): ListHead {
    if (this.#at !== At.Done) throw new Error('list body: cut short');
    return { members: this.#members, hasItems: this.#hasItems };
  }

  #enter(at: At): void {
    this.#depth++;
    this.#at = at;
  }

  #leave(at: At): void {
    this.#depth--;
    this.#at = at;
  }

  #endCapture(last: string): void {
    const text = this.#parts.length ? this.#parts.join('') + last : last;
    this.#parts = [];
    this.#captureDepth = -1;
    const value: unknown = JSON.parse(text);
    if (this.#depth === 2) {
      this.#at = At.ItemEnd;
      this.#onItem(value);
    } else {
      this.#at = At.MemberEnd;
      // An own property even for `__proto__`, as JSON.parse makes it.
      Object.defineProperty(this.#members, this.#key, { value, enumerable: true, writable: true, configurable: true });
    }
  }
}

/** Whether the run of backslashes ending right before `at` (not looking before `from`) is odd. */
function oddBackslashesBefore(s: string, at: number, from: number): boolean {
  let k = at - 1;
  while (k >= from && s.charCodeAt(k) === BACKSLASH) k--;
  return (at - 1 - k) % 2 === 1;
}
