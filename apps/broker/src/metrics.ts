/**
 * Counters of what the broker has served, logged on shutdown and readable in tests.
 */
export class BrokerMetrics {
  /** Messages appended, by topic. */
  readonly messagesInByTopic = new Map<string, number>();
  /** Bytes appended, by topic. */
  readonly bytesInByTopic = new Map<string, number>();
  /** Requests served, by request type name. */
  readonly requests = new Map<string, number>();
  /** Error responses (or rejected fire-and-forget requests), by error code name. */
  readonly errors = new Map<string, number>();
  /** Bytes of message sets sent to consumers. */
  bytesOut = 0;

  /** Counts `count` messages of `bytes` bytes appended to `topic`. */
  messagesIn(topic: string, count: number, bytes: number): void {
    this.messagesInByTopic.set(topic, (this.messagesInByTopic.get(topic) ?? 0) + count);
    this.bytesInByTopic.set(topic, (this.bytesInByTopic.get(topic) ?? 0) + bytes);
  }

  /** Counts one request of the given type. */
  request(type: string): void {
    this.requests.set(type, (this.requests.get(type) ?? 0) + 1);
  }

  /** Counts one error of the given code name. */
  error(code: string): void {
    this.errors.set(code, (this.errors.get(code) ?? 0) + 1);
  }

  /** A plain-object snapshot for logging. */
  toJSON(): object {
    return {
      messagesIn: Object.fromEntries(this.messagesInByTopic),
      bytesIn: Object.fromEntries(this.bytesInByTopic),
      bytesOut: this.bytesOut,
      requests: Object.fromEntries(this.requests),
      errors: Object.fromEntries(this.errors),
    };
  }
}
