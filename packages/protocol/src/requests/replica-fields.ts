/**
 * (klog, replication) Fields shared by the replication requests of docs/replication.md §6:
 * broker ids and lists of them, broker addresses, leader epochs, flags, and the
 * `errorCode int16 | count int16 | count x (topic string | partition int32 | errorCode int16)`
 * response of LEADER_AND_ISR and STOP_REPLICA.
 *
 * ```
 * BrokerIds       => count int16 | count x brokerId int32
 * Broker          => brokerId int32 | host string | port int32
 * PartitionErrors => count int16 | count x (topic string | partition int32 | errorCode int16)
 * ```
 */
import { type Decoder, type Encoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from '../errors.js';
import { readCount, readPartition } from './produce.js';

/** Where a broker listens: what a follower needs to connect to its leader without ZooKeeper. */
export interface BrokerAddress {
  /** The broker's id, ≥ 0. */
  readonly brokerId: number;
  /** Host name or address, 1 to 32767 bytes of UTF-8. */
  readonly host: string;
  /** TCP port, 1 to 65535. */
  readonly port: number;
}

/** One partition's error code in a response (0: done). */
export interface PartitionError {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: ErrorCodeValue;
}

/**
 * A response that carries an error code per partition (LEADER_AND_ISR, STOP_REPLICA). With a
 * top-level `errorCode` other than 0 (e.g. StaleControllerEpoch) the response is error-only and
 * `partitions` is empty.
 */
export interface PartitionErrorsResponse {
  readonly errorCode: ErrorCodeValue;
  readonly partitions: readonly PartitionError[];
}

function invalid(message: string): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidRequest, message);
}

/** Reads an int32 at least `min` (a broker id ≥ 0, a leader ≥ −1, an epoch ≥ 0 or ≥ −1). */
export function readInt32AtLeast(d: Decoder, what: string, min: number): number {
  const v = d.readInt32();
  if (v < min) throw invalid(`${what} ${v} is below ${min}`);
  return v;
}

/** Reads an int64 at least `min` (an offset ≥ 0, or ≥ −1 where −1 means unknown). */
export function readInt64AtLeast(d: Decoder, what: string, min: number): number {
  const v = d.readInt64();
  if (v < min) throw invalid(`${what} ${v} is below ${min}`);
  return v;
}

/** Reads an int8 flag: 0 is false, 1 true, anything else InvalidRequest. */
export function readFlag(d: Decoder, what: string): boolean {
  const v = d.readInt8();
  if (v !== 0 && v !== 1) throw invalid(`${what} ${v} is not 0 or 1`);
  return v === 1;
}

/** Writes `count int16 | count x int32`. @throws RangeError for more than 32767 ids */
export function writeBrokerIds(e: Encoder, ids: readonly number[]): void {
  if (ids.length > 0x7fff) throw new RangeError(`${ids.length} broker ids do not fit an int16 count`);
  e.writeInt16(ids.length);
  for (const id of ids) e.writeInt32(id);
}

/** Reads `count int16 | count x int32` broker ids, each ≥ 0, the count at least `min`. @throws ProtocolError */
export function readBrokerIds(d: Decoder, what: string, min: number): number[] {
  const count = readCount(d, what, min);
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push(readInt32AtLeast(d, `${what} broker id`, 0));
  return ids;
}

/** Writes `count int16 | count x Broker`. @throws RangeError for more than 32767 brokers */
export function writeBrokers(e: Encoder, brokers: readonly BrokerAddress[]): void {
  if (brokers.length > 0x7fff) throw new RangeError(`${brokers.length} brokers do not fit an int16 count`);
  e.writeInt16(brokers.length);
  for (const b of brokers) e.writeInt32(b.brokerId).writeString(b.host).writeInt32(b.port);
}

/** Reads `count int16 | count x Broker` (0 entries allowed). @throws ProtocolError */
export function readBrokers(d: Decoder, what: string): BrokerAddress[] {
  const count = readCount(d, what);
  const out: BrokerAddress[] = [];
  for (let i = 0; i < count; i++) {
    const brokerId = readInt32AtLeast(d, 'brokerId', 0);
    const host = d.readString('host');
    if (host.length === 0) throw invalid(`broker ${brokerId} has an empty host`);
    const port = d.readInt32();
    if (port < 1 || port > 65535) throw invalid(`broker ${brokerId} port ${port} is outside [1, 65535]`);
    out.push({ brokerId, host, port });
  }
  return out;
}

/** Writes `count int16 | count x (topic partition errorCode)`. */
export function writePartitionErrors(e: Encoder, partitions: readonly PartitionError[]): void {
  if (partitions.length > 0x7fff) throw new RangeError(`${partitions.length} partitions do not fit an int16 count`);
  e.writeInt16(partitions.length);
  for (const p of partitions) {
    validateTopic(p.topic);
    e.writeString(p.topic).writeInt32(p.partition).writeInt16(p.errorCode);
  }
}

/**
 * Reads a {@link PartitionErrorsResponse} body (after the top-level error code): an error-only
 * response (code ≠ 0, empty body) has no partitions.
 * @throws ProtocolError
 */
export function readPartitionErrorsResponse(errorCode: number, d: Decoder, what: string): PartitionErrorsResponse {
  const code = errorCode as ErrorCodeValue;
  if (code !== ErrorCode.None && d.remaining === 0) return { errorCode: code, partitions: [] };
  const count = readCount(d, what);
  const partitions: PartitionError[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    partitions.push({ topic, partition, errorCode: d.readInt16() as ErrorCodeValue });
  }
  d.assertDone(what);
  return { errorCode: code, partitions };
}
