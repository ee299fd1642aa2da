/**
 * Apache Kafka's error codes, as the Kafka listener answers them (docs/kafka-protocol.md), and
 * the one typed error every decoder of this package throws.
 */

/** The Kafka error codes klog answers with (a subset of Kafka's, same numbers). */
export const KafkaErrorCode = {
  UnknownServerError: -1,
  None: 0,
  OffsetOutOfRange: 1,
  CorruptMessage: 2,
  UnknownTopicOrPartition: 3,
  InvalidFetchSize: 4,
  LeaderNotAvailable: 5,
  NotLeaderForPartition: 6,
  RequestTimedOut: 7,
  MessageTooLarge: 10,
  OffsetMetadataTooLarge: 12,
  CoordinatorNotAvailable: 15,
  NotCoordinator: 16,
  InvalidTopicException: 17,
  RecordListTooLarge: 18,
  NotEnoughReplicas: 19,
  NotEnoughReplicasAfterAppend: 20,
  InvalidRequiredAcks: 21,
  IllegalGeneration: 22,
  InconsistentGroupProtocol: 23,
  InvalidGroupId: 24,
  UnknownMemberId: 25,
  InvalidSessionTimeout: 26,
  RebalanceInProgress: 27,
  InvalidCommitOffsetSize: 28,
  UnsupportedVersion: 35,
  TopicAlreadyExists: 36,
  InvalidPartitions: 37,
  InvalidReplicationFactor: 38,
  InvalidReplicaAssignment: 39,
  InvalidConfig: 40,
  InvalidRequest: 42,
} as const;

/** One of the values of {@link KafkaErrorCode}. */
export type KafkaErrorCodeValue = (typeof KafkaErrorCode)[keyof typeof KafkaErrorCode];

const names = new Map<number, string>(Object.entries(KafkaErrorCode).map(([k, v]) => [v, k]));

/** The name of a Kafka error code (`"NotCoordinator"`), or `"Unknown(<code>)"`. */
export function kafkaErrorName(code: number): string {
  return names.get(code) ?? `Unknown(${code})`;
}

/**
 * Thrown by every decoder of @klog/kafka-protocol when bytes are not what the layout says:
 * truncated input, a negative or oversized length, an array longer than the bytes left, a bad
 * CRC, an unknown magic byte, an API or version klog does not serve. `code` is the Kafka error
 * code that describes it (InvalidRequest, CorruptMessage, UnsupportedVersion, ...).
 */
export class KafkaProtocolError extends Error {
  override readonly name = 'KafkaProtocolError';
  constructor(
    /** The Kafka error code that describes the problem. */
    readonly code: KafkaErrorCodeValue,
    message: string,
  ) {
    super(message);
  }
}
