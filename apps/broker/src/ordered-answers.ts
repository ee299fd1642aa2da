/**
 * The answers of one connection, written to its socket in the order of their requests while a
 * later request is already being handled: klog's pipelined PRODUCE_ACKs (connection.ts) and the
 * Kafka listener's produces waiting for their flush or high watermark (kafka/connection.ts).
 */

/** How a connection writes its answers; both are called in turn, one answer at a time. */
export interface AnswerWriter<T> {
  /**
   * Writes an answer whose turn came (or drops it, when the connection is closed); `release`
   * is what was given with it to {@link OrderedAnswers.add}. The next answer waits until the
   * promise returned settles (while the socket's buffer is full, say).
   */
  write(answer: T, release: () => void): Promise<void> | void;
  /**
   * Called in turn in place of {@link write} for an answer whose promise rejected (after its
   * `release`), and after a `write` that threw or rejected. Must not throw.
   */
  failed(err: unknown): void;
}

/** An answer's promise settled into a value, so that its rejection is handled at once. */
type Settled<T> = { readonly value: T } | { readonly err: unknown };

function noRelease(): void {}

/**
 * Answers written in the order they were added, each once it is ready and every answer before
 * it has been written. An answer is a value or a promise of one; a promise is settled into a
 * value as soon as it is added, so one that rejects while it waits behind earlier answers is
 * never an unhandled rejection: in its turn it is released and passed to
 * {@link AnswerWriter.failed}, and the answers after it are written as usual (as after a
 * write that throws, which goes to `failed` too). The chain itself never rejects, as long as
 * `failed` does not throw. What a closed connection does with its answers is the writer's (drop
 * and release them, or skip writing to a destroyed socket): every answer still takes its turn
 * and then stops counting as {@link waiting}.
 *
 * At most {@link max} answers are meant to wait: the connection stops taking requests while
 * {@link full}, until {@link allWritten} settles.
 */
export class OrderedAnswers<T> {
  private count = 0;
  private chain: Promise<void> = Promise.resolve();

  /**
   * @param max how many answers may wait before {@link full}
   * @param writer writes each answer in turn, and is told of those that failed
   */
  constructor(
    readonly max: number,
    private readonly writer: AnswerWriter<T>,
  ) {}

  /** Answers added whose turn has not ended (not yet written, dropped or failed). */
  get waiting(): number {
    return this.count;
  }

  /** True while {@link max} or more answers wait: the connection takes no request until {@link allWritten} settles. */
  get full(): boolean {
    return this.count >= this.max;
  }

  /**
   * Settles once every answer added so far has had its turn (written, dropped or failed) and no
   * longer counts as {@link waiting}; never rejects. Answers added later are not waited for.
   */
  get allWritten(): Promise<void> {
    return this.chain;
  }

  /**
   * Adds an answer, written after every answer added before it once it is there.
   * @param answer the answer, or a promise of it
   * @param release what the answer holds, given to the writer with it, and called by itself
   *   when the answer's promise rejects
   */
  add(answer: T | Promise<T>, release: () => void = noRelease): void {
    this.count++;
    const ready = answer instanceof Promise ? answer.then((value: T): Settled<T> => ({ value }), (err: unknown): Settled<T> => ({ err })) : { value: answer };
    this.chain = this.turn(this.chain, ready, release);
  }

  /** Waits for the answers before, then writes this one (or reports its failure). */
  private async turn(before: Promise<void>, ready: Settled<T> | Promise<Settled<T>>, release: () => void): Promise<void> {
    try {
      await before;
      const settled = await ready;
      if ('err' in settled) {
        release();
        this.writer.failed(settled.err);
      } else await this.writer.write(settled.value, release);
    } catch (err) {
      this.writer.failed(err);
    } finally {
      this.count--;
    }
  }
}
