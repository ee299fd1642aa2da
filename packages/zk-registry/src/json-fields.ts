/**
 * Strict reading of the JSON values replication keeps in ZooKeeper (docs/replication.md §3.1):
 * a value is an object; each field read must have its type and range, else the whole value is
 * refused with {@link InvalidZkValueError}; fields that are not read are ignored (a newer klog
 * may add some). Nothing is guessed or defaulted here: callers say which fields are optional.
 */
import { InvalidZkValueError } from './errors.js';

/** Reads one JSON object value and its fields; every failure names the value's kind and path. */
export class JsonFields {
  private readonly object: Record<string, unknown>;

  private constructor(
    readonly kind: string,
    readonly path: string,
    readonly text: string,
    value: unknown,
  ) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) this.fail('not a JSON object');
    this.object = value as Record<string, unknown>;
  }

  /** Parses `text` as a JSON object. Throws {@link InvalidZkValueError}. */
  static parse(kind: string, path: string, text: string): JsonFields {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new InvalidZkValueError(kind, path, text, 'not JSON');
    }
    return new JsonFields(kind, path, text, value);
  }

  /** Throws {@link InvalidZkValueError} with `reason`. */
  fail(reason: string): never {
    throw new InvalidZkValueError(this.kind, this.path, this.text, reason);
  }

  /** Whether the field is present (not undefined). */
  has(name: string): boolean {
    return this.object[name] !== undefined;
  }

  /** The raw field. */
  raw(name: string): unknown {
    return this.object[name];
  }

  /** `version` must be 1, the only layout this klog writes and reads. */
  version1(): void {
    const v = this.object['version'];
    if (v !== 1) this.fail(v === undefined ? 'no "version"' : `unsupported version ${JSON.stringify(v)} (this klog reads version 1)`);
  }

  /** An integer field in `min..max`. */
  int(name: string, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
    const v = this.object[name];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      this.fail(v === undefined ? `no "${name}"` : `"${name}" must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
    }
    return v;
  }

  /** A boolean field. */
  bool(name: string): boolean {
    const v = this.object[name];
    if (typeof v !== 'boolean') this.fail(v === undefined ? `no "${name}"` : `"${name}" must be true or false, got ${JSON.stringify(v)}`);
    return v;
  }

  /** A string field matching `pattern`. */
  string(name: string, pattern: RegExp, what: string): string {
    const v = this.object[name];
    if (typeof v !== 'string' || !pattern.test(v)) this.fail(v === undefined ? `no "${name}"` : `"${name}" must be ${what}, got ${JSON.stringify(v)}`);
    return v;
  }

  /** An array of broker ids (non-negative integers), none repeated. */
  brokerIds(name: string, value: unknown = this.object[name]): number[] {
    if (!Array.isArray(value)) this.fail(value === undefined ? `no "${name}"` : `"${name}" must be an array of broker ids`);
    for (const id of value) {
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) this.fail(`"${name}" names ${JSON.stringify(id)}: not a broker id`);
    }
    const ids = value as number[];
    if (new Set(ids).size !== ids.length) this.fail(`"${name}" names a broker twice: ${ids.join(',')}`);
    return [...ids];
  }
}
