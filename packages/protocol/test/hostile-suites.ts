/**
 * The hostile-input checks that every request family runs (test/hostile.test.ts for the paper's
 * requests, test/replication-hostile.test.ts for replication's): decoders only ever throw
 * ProtocolError with a meaningful code, never a RangeError or TypeError, and never hang. Each
 * function registers vitest cases for the decoders and layouts it is given.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { decodeRequest, ErrorCode, type ErrorCodeValue } from '../src/index.js';
import { build, hostileCases, type Field } from './field-layouts.js';
import { errorCodeArb, expectProtocolError, returnsOrProtocolError } from './helpers.js';

/** A response decoder by name: the response body after its `int16 errorCode`, and that code. */
export type ResponseDecoders = Record<string, (body: Buffer, errorCode: number) => unknown>;

/** A response's field layout, the error code it is decoded with, and its decoder. */
export interface ResponseLayout {
  readonly fields: Field[];
  readonly errorCode: ErrorCodeValue;
  readonly decode: (body: Buffer, code: number) => unknown;
}

/** The codes a cut-short frame may be refused with. */
const truncatedCodes: readonly number[] = [ErrorCode.InvalidRequest, ErrorCode.InvalidTopic];

/** A case: `decodeRequest` of a frame of a type in `[minType, maxType]` with a random body returns or throws ProtocolError. */
export function itRandomRequestBodies(title: string, minType: number, maxType: number, numRuns = 3000): void {
  it(title, () => {
    fc.assert(
      fc.property(fc.integer({ min: minType, max: maxType }), fc.uint8Array({ maxLength: 300 }), (type, u) => {
        const frame = Buffer.alloc(2 + u.length);
        frame.writeInt16BE(type, 0);
        frame.set(u, 2);
        returnsOrProtocolError(() => decodeRequest(frame));
      }),
      { numRuns },
    );
  });
}

/** One case per decoder: random bytes, with a random error code, only ever give ProtocolError. */
export function itResponseDecodersOnRandomBytes(decoders: ResponseDecoders): void {
  it.each(Object.keys(decoders))('the %s response decoder only ever throws ProtocolError', (name) => {
    const decode = decoders[name]!;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), errorCodeArb, (u, code) => {
        returnsOrProtocolError(() => decode(Buffer.from(u), code));
      }),
      { numRuns: 1000 },
    );
  });
}

/**
 * A case: every body of `bodies` decodes whole (with `decode`, or the decoder its `name` picks)
 * and every strict prefix of it is refused as cut short; `skip(body, cut)` true passes over a
 * prefix that is itself a valid body.
 */
export function itStrictPrefixesRefused<T extends { readonly body: Buffer; readonly name?: string }>(
  title: string,
  bodies: fc.Arbitrary<T>,
  decode: (body: Buffer, sample: T) => unknown,
  skip: (sample: T, cut: number) => boolean = () => false,
): void {
  it(title, () => {
    fc.assert(
      fc.property(bodies, (sample) => {
        expect(() => decode(sample.body, sample)).not.toThrow();
        for (let cut = 0; cut < sample.body.length; cut++) {
          if (skip(sample, cut)) continue;
          const err = expectProtocolError(() => decode(sample.body.subarray(0, cut), sample));
          expect(truncatedCodes).toContain(err.code);
        }
      }),
      { numRuns: 100 },
    );
  }, 30_000);
}

/**
 * Cases per request layout (decoded by `decodeRequest`): the layout as it is decodes, and each of
 * its hostile values (field-layouts.ts `hostileCases`) is refused with its code; `codesFor` may
 * widen the codes allowed for one case.
 */
export function itRequestLayout(fields: Field[], codesFor: (what: string, code: number) => readonly number[] = (_, code) => [code]): void {
  it('the unmodified layout decodes', () => {
    expect(() => decodeRequest(build(fields))).not.toThrow();
  });
  it.each(hostileCases(fields))('%s', (what, mutated, code) => {
    const err = expectProtocolError(() => decodeRequest(build(mutated)));
    expect(codesFor(what, code)).toContain(err.code);
  });
}

/** Cases per response layout: as it is, it decodes; each hostile value is refused with its code. */
export function itResponseLayout({ fields, errorCode, decode }: ResponseLayout): void {
  it('the unmodified layout decodes', () => {
    expect(() => decode(build(fields), errorCode)).not.toThrow();
  });
  it.each(hostileCases(fields))('%s', (_, mutated, code) => {
    expectProtocolError(() => decode(build(mutated), errorCode), code);
  });
}

/** Topic names every decoder must refuse with InvalidTopic, by what is wrong with them (docs/format.md §1). */
export const badTopicNames: readonly [string, Buffer][] = [
  ['""', Buffer.alloc(0)],
  ['"."', Buffer.from('.')],
  ['".."', Buffer.from('..')],
  ['"a/b"', Buffer.from('a/b')],
  ['"../etc"', Buffer.from('../etc')],
  ['300 characters', Buffer.from('a'.repeat(300))],
  ['250 characters', Buffer.from('a'.repeat(250))],
  ['non-ASCII', Buffer.from('tōpic')],
  ['invalid UTF-8', Buffer.from([0x61, 0xff, 0xfe])],
  ['a NUL byte', Buffer.from([0x61, 0x00])],
];

/**
 * Cases per layout that carries a topic (a `strlen` field): every topic of it replaced by each of
 * `badTopics`, with a matching length, is refused with InvalidTopic.
 */
export function itBadTopicsRefused(
  requestLayouts: Record<string, Field[]>,
  responseLayouts: Record<string, ResponseLayout>,
  badTopics: readonly [string, Buffer][] = badTopicNames,
): void {
  const layouts: [string, Field[], (b: Buffer) => unknown][] = [
    ...Object.entries(requestLayouts).map(([n, f]): [string, Field[], (b: Buffer) => unknown] => [n, f, (b) => decodeRequest(b)]),
    ...Object.entries(responseLayouts).map(([n, r]): [string, Field[], (b: Buffer) => unknown] => [`${n} response`, r.fields, (b) => r.decode(b, r.errorCode)]),
  ].filter(([, fields]) => fields.some((f) => f.role === 'strlen'));
  for (const [name, fields, decode] of layouts) {
    it.each(badTopics)(`${name}: %s is InvalidTopic`, (_, bytes) => {
      const mutated = fields.map((f, i) => {
        if (f.role === 'strlen') return { ...f, value: bytes.length };
        if (i > 0 && fields[i - 1]!.role === 'strlen') return { ...f, value: bytes };
        return f;
      });
      expectProtocolError(() => decode(build(mutated)), ErrorCode.InvalidTopic);
    });
  }
}
