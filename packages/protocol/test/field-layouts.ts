/**
 * Request and response layouts written field by field, each field tagged with what it is, and
 * the hostile values each kind of field gets (test/hostile.test.ts,
 * test/replication-hostile.test.ts).
 */
import { ErrorCode, encodeMessageSet, type ErrorCodeValue } from '../src/index.js';

type Kind = 'i8' | 'i16' | 'i32' | 'i64';
export interface Field {
  readonly kind: Kind | 'raw';
  readonly value: number | bigint | Buffer;
  /** What the field is, which decides which hostile values it gets. */
  readonly role?:
    | 'strlen'
    | 'count'
    | 'size'
    | 'partition'
    | 'int64'
    | 'maxBytes'
    | 'maxOffsets'
    | 'maxWaitMs'
    | 'acks'
    | 'time'
    | 'brokerId'
    | 'leader'
    | 'epoch'
    | 'epochOrNone'
    | 'offset'
    | 'offsetOrNone'
    | 'flag'
    | 'port'
    | 'minIsr'
    | 'count32';
  readonly name: string;
}

export const i8 = (name: string, value: number, role?: Field['role']): Field => ({ kind: 'i8', value, role, name });
export const i16 = (name: string, value: number, role?: Field['role']): Field => ({ kind: 'i16', value, role, name });
export const i32 = (name: string, value: number, role?: Field['role']): Field => ({ kind: 'i32', value, role, name });
export const i64 = (name: string, value: number, role: Field['role'] = 'int64'): Field => ({ kind: 'i64', value: BigInt(value), role, name });
export const raw = (name: string, value: Buffer): Field => ({ kind: 'raw', value, name });
export const topic = (name: string, t: string): Field[] => [i16(`${name} length`, Buffer.byteLength(t), 'strlen'), raw(name, Buffer.from(t))];
/** A `string` field that is not a topic name (its length is still hostile-tested as a size). */
export const str = (name: string, s: string): Field[] => [i16(`${name} length`, Buffer.byteLength(s), 'count'), raw(name, Buffer.from(s))];
export const set = encodeMessageSet([Buffer.from('hello'), Buffer.from('klog')]);

export function build(fields: readonly Field[]): Buffer {
  const parts = fields.map((f) => {
    if (f.kind === 'raw') return f.value as Buffer;
    const b = Buffer.alloc(f.kind === 'i8' ? 1 : f.kind === 'i16' ? 2 : f.kind === 'i32' ? 4 : 8);
    if (f.kind === 'i8') b.writeInt8(Number(f.value));
    if (f.kind === 'i16') b.writeInt16BE(Number(f.value));
    if (f.kind === 'i32') b.writeInt32BE(Number(f.value));
    if (f.kind === 'i64') b.writeBigInt64BE(BigInt(f.value as number | bigint));
    return b;
  });
  return Buffer.concat(parts);
}

export const I16 = { max: 0x7fff, min: -0x8000 };
export const I32 = { max: 0x7fffffff, min: -0x80000000 };
const I64 = { max: 2n ** 63n - 1n, min: -(2n ** 63n) };

const badInt64: [number | bigint, ErrorCodeValue][] = [
  [2n ** 53n, ErrorCode.InvalidRequest],
  [-(2n ** 53n), ErrorCode.InvalidRequest],
  [I64.max, ErrorCode.InvalidRequest],
  [I64.min, ErrorCode.InvalidRequest],
];

/** Hostile values per role and the error code each must produce. */
export const hostile: Record<NonNullable<Field['role']>, [number | bigint, ErrorCodeValue][]> = {
  strlen: [
    [I16.max, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I16.min, ErrorCode.InvalidRequest],
    [0, ErrorCode.InvalidTopic],
  ],
  count: [
    [I16.max, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I16.min, ErrorCode.InvalidRequest],
  ],
  size: [
    [I32.max, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  partition: [
    [-1, ErrorCode.WrongPartition],
    [I32.min, ErrorCode.WrongPartition],
  ],
  maxBytes: [
    [-1, ErrorCode.InvalidFetchSize],
    [I32.min, ErrorCode.InvalidFetchSize],
  ],
  maxOffsets: [
    [0, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  maxWaitMs: [
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  acks: [
    [0, ErrorCode.InvalidRequest],
    [3, ErrorCode.InvalidRequest],
    [-2, ErrorCode.InvalidRequest],
    [I16.min, ErrorCode.InvalidRequest],
  ],
  int64: badInt64,
  time: [[-3, ErrorCode.InvalidRequest], ...badInt64.slice(0, 1), ...badInt64.slice(2)],
  brokerId: [
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  leader: [
    [-2, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  epoch: [
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  epochOrNone: [
    [-2, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
  offset: [[-1, ErrorCode.InvalidRequest], ...badInt64],
  offsetOrNone: [[-2, ErrorCode.InvalidRequest], ...badInt64],
  flag: [
    [2, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [127, ErrorCode.InvalidRequest],
  ],
  port: [
    [0, ErrorCode.InvalidRequest],
    [65536, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I32.max, ErrorCode.InvalidRequest],
  ],
  minIsr: [
    [0, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I16.min, ErrorCode.InvalidRequest],
  ],
  count32: [
    [I32.max, ErrorCode.InvalidRequest],
    [-1, ErrorCode.InvalidRequest],
    [I32.min, ErrorCode.InvalidRequest],
  ],
};

export function withField(fields: readonly Field[], index: number, value: number | bigint): Field[] {
  return fields.map((f, i) => (i === index ? { ...f, value } : f));
}

export function hostileCases(fields: readonly Field[]): [string, Field[], ErrorCodeValue][] {
  const cases: [string, Field[], ErrorCodeValue][] = [];
  fields.forEach((f, i) => {
    if (f.role === undefined) return;
    for (const [value, code] of hostile[f.role]) cases.push([`${f.name} = ${value}`, withField(fields, i, value), code]);
  });
  return cases;
}
