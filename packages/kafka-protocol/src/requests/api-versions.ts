/**
 * ApiVersions (key 18), versions 0-2:
 *
 * ```
 * ApiVersions Request (Version: 0-2) =>                      (empty body)
 * ApiVersions Response (Version: 0) => error_code int16 [api_keys]
 *   api_keys => api_key int16 min_version int16 max_version int16
 * ApiVersions Response (Version: 1-2) => error_code int16 [api_keys] throttle_time_ms int32
 * ```
 *
 * A request of a version above 2 (librdkafka first sends v3, a flexible version with a
 * different header) is answered with UNSUPPORTED_VERSION in the v0 layout, with the full table,
 * so the client retries at a version listed there.
 */
import { supportedApis } from '../api-keys.js';
import { KafkaErrorCode } from '../errors.js';
import { finishResponse, startResponse } from '../header.js';

/** The framed ApiVersions response for a request of `version` (any version: above 2 gets UNSUPPORTED_VERSION, v0 layout). */
export function encodeApiVersionsResponse(correlationId: number, version: number): Buffer {
  const w = startResponse(correlationId, 128);
  w.int16(version > 2 || version < 0 ? KafkaErrorCode.UnsupportedVersion : KafkaErrorCode.None);
  w.array(supportedApis, (w, a) => w.int16(a.apiKey).int16(a.minVersion).int16(a.maxVersion));
  if (version >= 1 && version <= 2) w.int32(0);
  return finishResponse(w);
}
