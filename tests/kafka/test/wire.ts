/** A bare Kafka wire client for tests: sends request frames, reads response frames in order. */
import { connect, type Socket } from 'node:net';
import { KafkaReader, encodeRequest, type KafkaWriter } from '@klog/kafka-protocol';

export class KafkaWire {
  private buffered = Buffer.alloc(0);
  private waiting: ((frame: Buffer) => void)[] = [];
  private correlationId = 0;
  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, d]);
      while (this.buffered.length >= 4 && this.buffered.length >= 4 + this.buffered.readInt32BE(0)) {
        const size = this.buffered.readInt32BE(0);
        const frame = this.buffered.subarray(4, 4 + size);
        this.buffered = this.buffered.subarray(4 + size);
        this.waiting.shift()?.(frame);
      }
    });
  }

  static async open(hostPort: string): Promise<KafkaWire> {
    const [host, port] = hostPort.split(':');
    const socket = connect(Number(port), host);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    return new KafkaWire(socket);
  }

  /** Sends a request and reads its response; the reader is past the correlation id. */
  async call(apiKey: number, apiVersion: number, body: (w: KafkaWriter) => void): Promise<KafkaReader> {
    const correlationId = ++this.correlationId;
    const frame = encodeRequest({ apiKey, apiVersion, correlationId, clientId: 'wire-test' }, body);
    const answer = new Promise<Buffer>((resolve) => this.waiting.push(resolve));
    this.socket.write(frame);
    const r = new KafkaReader(await answer);
    if (r.int32() !== correlationId) throw new Error('response out of order');
    return r;
  }

  /** Resolves when the broker closes the connection. */
  closed(): Promise<void> {
    return new Promise((resolve) => (this.socket.destroyed ? resolve() : this.socket.once('close', () => resolve())));
  }

  close(): void {
    this.socket.destroy();
  }
}
