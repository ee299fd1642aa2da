/**
 * The APIs the Kafka listener serves and their versions, advertised by ApiVersions with exactly
 * these ranges on every broker (docs/kafka-protocol.md): Kafka 0.10's level, non-flexible
 * versions only.
 */
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';

/** Kafka's API keys, for the APIs klog serves. */
export const ApiKey = {
  Produce: 0,
  Fetch: 1,
  ListOffsets: 2,
  Metadata: 3,
  OffsetCommit: 8,
  OffsetFetch: 9,
  FindCoordinator: 10,
  JoinGroup: 11,
  Heartbeat: 12,
  LeaveGroup: 13,
  SyncGroup: 14,
  ApiVersions: 18,
  CreateTopics: 19,
} as const;

/** One of the values of {@link ApiKey}. */
export type ApiKeyValue = (typeof ApiKey)[keyof typeof ApiKey];

/** One entry of the ApiVersions answer. */
export interface ApiVersionRange {
  readonly apiKey: ApiKeyValue;
  readonly minVersion: number;
  readonly maxVersion: number;
}

/** Every API klog serves with its version range, by API key. */
export const supportedApis: readonly ApiVersionRange[] = [
  { apiKey: ApiKey.Produce, minVersion: 0, maxVersion: 2 },
  { apiKey: ApiKey.Fetch, minVersion: 0, maxVersion: 4 },
  { apiKey: ApiKey.ListOffsets, minVersion: 0, maxVersion: 1 },
  { apiKey: ApiKey.Metadata, minVersion: 1, maxVersion: 4 },
  { apiKey: ApiKey.OffsetCommit, minVersion: 2, maxVersion: 2 },
  { apiKey: ApiKey.OffsetFetch, minVersion: 1, maxVersion: 1 },
  { apiKey: ApiKey.FindCoordinator, minVersion: 0, maxVersion: 0 },
  { apiKey: ApiKey.JoinGroup, minVersion: 0, maxVersion: 0 },
  { apiKey: ApiKey.Heartbeat, minVersion: 0, maxVersion: 0 },
  { apiKey: ApiKey.LeaveGroup, minVersion: 0, maxVersion: 0 },
  { apiKey: ApiKey.SyncGroup, minVersion: 0, maxVersion: 0 },
  { apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion: 2 },
  { apiKey: ApiKey.CreateTopics, minVersion: 0, maxVersion: 0 },
];

const byKey = new Map<number, ApiVersionRange>(supportedApis.map((a) => [a.apiKey, a]));
const keyNames = new Map<number, string>(Object.entries(ApiKey).map(([k, v]) => [v, k]));

/** The name of an API key (`"Fetch"`), or `"ApiKey(<n>)"` for one klog does not serve. */
export function apiKeyName(apiKey: number): string {
  return keyNames.get(apiKey) ?? `ApiKey(${apiKey})`;
}

/** True when klog serves `version` of `apiKey`. */
export function isSupported(apiKey: number, version: number): boolean {
  const a = byKey.get(apiKey);
  return a !== undefined && version >= a.minVersion && version <= a.maxVersion;
}

/**
 * @throws KafkaProtocolError (UnsupportedVersion) unless klog serves `version` of `apiKey`
 */
export function checkSupported(apiKey: number, version: number): void {
  if (!isSupported(apiKey, version)) {
    throw new KafkaProtocolError(KafkaErrorCode.UnsupportedVersion, `${apiKeyName(apiKey)} v${version} is not supported`);
  }
}
