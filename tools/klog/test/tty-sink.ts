/** A stand-in for stderr in tests of the progress displays: collects what is written, and says it is (or is not) a terminal of `columns` columns. */
import { Writable } from 'node:stream';

export type TtySink = Writable & { text: string; isTTY: boolean; columns: number };

export function sink(tty: boolean, columns: number): TtySink {
  const s = new Writable({
    write(chunk: Buffer, _encoding, done) {
      s.text += chunk.toString();
      done();
    },
  }) as TtySink;
  s.text = '';
  s.isTTY = tty;
  s.columns = columns;
  return s;
}
