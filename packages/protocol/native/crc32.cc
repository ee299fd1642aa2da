// klog_crc32: the CRC-32 (IEEE) of message payloads (docs/design.md §1), computed by ISA-L
// (Intel's Intelligent Storage Acceleration Library, `crc32_gzip_refl`: the same CRC as zlib's
// `crc32`, folded with PCLMULQDQ where the CPU has it).
//
// Why native: every message carries its own CRC, so a producer computes one per message and a
// broker checks one per message (a combined check of a whole set can be fooled, see
// src/crc32.ts). From JavaScript each of those is one call into zlib, about 250 ns for a
// 200-byte payload on the machines of docs/benchmarks.md, most of it zlib's fixed cost per call.
// Here a whole message set is one call from JavaScript, and each payload costs ISA-L's folding
// (about 30 ns for 200 bytes). The conversions of whole message sets between Kafka's layout and
// klog's, which the Kafka listener does per Produce and Fetch, are in kafka-messages.cc.
//
// The functions take (bytes, start, end) and work on bytes [start, end) of the Uint8Array. The
// message functions walk whole messages only (`length int32 | magic | attributes | crc uint32 |
// payload`); the caller has already checked the framing (lengths, magic) in JavaScript, but the
// walk checks every length again against the range so that no input can make it read or write
// outside [start, end).
//
// Plain Node-API (node_api.h) rather than node-addon-api: a call costs about 150 ns here against
// about 235 ns through node-addon-api's checks, which matters for the calls that CRC one payload.
#include <node_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "messages.h"

namespace {

using namespace klog;

/** The arguments (bytes, start, end): bytes [start, end) of a Uint8Array. */
struct Range {
  uint8_t* begin;
  size_t length;
  /** `start`, to report positions as positions in `bytes`. */
  size_t start;
};

/** Reads the arguments into `r`, or throws (TypeError, RangeError) and returns false. */
bool GetRange(napi_env env, napi_callback_info info, Range* r) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 3) {
    napi_throw_type_error(env, nullptr, "expected (bytes: Uint8Array, start: number, end: number)");
    return false;
  }
  napi_typedarray_type type;
  size_t length;
  void* data;
  bool isTypedArray = false;
  double start, end;
  if (napi_is_typedarray(env, argv[0], &isTypedArray) != napi_ok || !isTypedArray ||
      napi_get_typedarray_info(env, argv[0], &type, &length, &data, nullptr, nullptr) != napi_ok ||
      type != napi_uint8_array || napi_get_value_double(env, argv[1], &start) != napi_ok ||
      napi_get_value_double(env, argv[2], &end) != napi_ok) {
    napi_throw_type_error(env, nullptr, "expected (bytes: Uint8Array, start: number, end: number)");
    return false;
  }
  if (!(start >= 0 && start <= end && end <= static_cast<double>(length)) ||
      start != static_cast<double>(static_cast<size_t>(start)) || end != static_cast<double>(static_cast<size_t>(end))) {
    napi_throw_range_error(env, nullptr, "start and end must be integers with 0 <= start <= end <= bytes.length");
    return false;
  }
  r->start = static_cast<size_t>(start);
  r->begin = static_cast<uint8_t*>(data) + r->start;
  r->length = static_cast<size_t>(end) - r->start;
  return true;
}


/** Throws the RangeError of a range that is not a run of whole messages; returns nullptr (undefined). */
napi_value NotWhole(napi_env env, const Range& r, size_t pos) {
  std::string msg = "not a run of whole messages at byte " + std::to_string(r.start + pos);
  napi_throw_range_error(env, nullptr, msg.c_str());
  return nullptr;
}

/**
 * Walks the whole messages of `r`, calling `each(message)` for each; stops early when `each`
 * returns false.
 * @returns the position where it stopped (r.length when it walked them all), or SIZE_MAX after
 *   throwing because the range is not a run of whole messages
 */
template <typename F>
size_t WalkMessages(napi_env env, const Range& r, F each) {
  size_t pos = 0;
  while (pos < r.length) {
    uint8_t* m = r.begin + pos;
    uint32_t length = r.length - pos >= kOverhead ? ReadUint32BE(m) : 0;
    if (length < kHeader || length > r.length - pos - 4) {
      NotWhole(env, r, pos);
      return SIZE_MAX;
    }
    if (!each(m, length - kHeader)) return pos;
    pos += 4 + static_cast<size_t>(length);
  }
  return pos;
}

/** crc32(bytes, start, end) → the CRC-32 (IEEE) of bytes[start, end), an unsigned 32-bit number. */
napi_value Crc32(napi_env env, napi_callback_info info) {
  Range r;
  if (!GetRange(env, info, &r)) return nullptr;
  return Number(env, Crc(r.begin, r.length));
}

/**
 * firstBadCrc(bytes, start, end) → -1 when every message of bytes[start, end) has the CRC of
 * its payload in its crc field, else the position in `bytes` of the first that has not.
 * Throws RangeError when [start, end) is not a run of whole messages.
 */
napi_value FirstBadCrc(napi_env env, napi_callback_info info) {
  Range r;
  if (!GetRange(env, info, &r)) return nullptr;
  size_t stop = WalkMessages(env, r, [](const uint8_t* m, size_t payload) {
    return Crc(m + kOverhead, payload) == ReadUint32BE(m + kCrcAt);
  });
  if (stop == SIZE_MAX) return nullptr;
  return Number(env, stop == r.length ? -1 : static_cast<double>(r.start + stop));
}

/**
 * writeCrcs(bytes, start, end): stores in every message of bytes[start, end) the CRC of its
 * payload. Throws RangeError (having written the messages before the fault) when [start, end)
 * is not a run of whole messages.
 */
napi_value WriteCrcs(napi_env env, napi_callback_info info) {
  Range r;
  if (!GetRange(env, info, &r)) return nullptr;
  WalkMessages(env, r, [](uint8_t* m, size_t payload) {
    WriteUint32BE(m + kCrcAt, Crc(m + kOverhead, payload));
    return true;
  });
  return nullptr;
}


/**
 * writeKafkaCrcs(bytes, start, end): stores in every message of the Kafka message set
 * bytes[start, end) (`offset int64 | message_size int32 | crc uint32 | magic..value`, see
 * packages/kafka-protocol/src/message-set.ts) the CRC-32 of its bytes after the crc field.
 * Throws RangeError (having written the messages before the fault) when [start, end) is not a
 * run of whole Kafka messages.
 */
napi_value WriteKafkaCrcs(napi_env env, napi_callback_info info) {
  Range r;
  if (!GetRange(env, info, &r)) return nullptr;
  size_t pos = 0;
  while (pos < r.length) {
    uint8_t* m = r.begin + pos;
    uint32_t size = r.length - pos >= kKafkaLogOverhead ? ReadUint32BE(m + 8) : 0;
    if (size < kKafkaMinSize || size > r.length - pos - kKafkaLogOverhead) return NotWhole(env, r, pos);
    WriteUint32BE(m + kKafkaLogOverhead, Crc(m + kKafkaLogOverhead + 4, size - 4));
    pos += kKafkaLogOverhead + static_cast<size_t>(size);
  }
  return nullptr;
}

/**
 * copyRanges(src, dst, plan, count): for i < count, copies plan[3i + 2] bytes from src at
 * plan[3i] to dst at plan[3i + 1] (plan an Int32Array): the keys and values of a re-framed Kafka
 * message set, in one call rather than one per message. Throws RangeError (having copied the
 * ranges before it) at a range outside either buffer.
 */
napi_value CopyRanges(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_typedarray_type ts, td, tp;
  size_t ls, ld, lp;
  void *ds, *dd, *dp;
  double count;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 4 ||
      napi_get_typedarray_info(env, argv[0], &ts, &ls, &ds, nullptr, nullptr) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &td, &ld, &dd, nullptr, nullptr) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &tp, &lp, &dp, nullptr, nullptr) != napi_ok ||
      ts != napi_uint8_array || td != napi_uint8_array || tp != napi_int32_array ||
      napi_get_value_double(env, argv[3], &count) != napi_ok) {
    napi_throw_type_error(env, nullptr, "expected (src: Uint8Array, dst: Uint8Array, plan: Int32Array, count: number)");
    return nullptr;
  }
  if (!(count >= 0 && count * 3 <= static_cast<double>(lp))) {
    napi_throw_range_error(env, nullptr, "count must be within plan.length / 3");
    return nullptr;
  }
  const uint8_t* src = static_cast<const uint8_t*>(ds);
  uint8_t* dst = static_cast<uint8_t*>(dd);
  const int32_t* plan = static_cast<const int32_t*>(dp);
  size_t n = static_cast<size_t>(count);
  for (size_t i = 0; i < n; i++) {
    int32_t from = plan[3 * i], to = plan[3 * i + 1], length = plan[3 * i + 2];
    if (from < 0 || to < 0 || length < 0 || static_cast<size_t>(from) + length > ls || static_cast<size_t>(to) + length > ld) {
      std::string msg = "copy range " + std::to_string(i) + " is outside the buffers";
      napi_throw_range_error(env, nullptr, msg.c_str());
      return nullptr;
    }
    memcpy(dst + to, src + from, static_cast<size_t>(length));
  }
  return nullptr;
}


napi_value Init(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"crc32", nullptr, Crc32, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"firstBadCrc", nullptr, FirstBadCrc, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"writeCrcs", nullptr, WriteCrcs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"writeKafkaCrcs", nullptr, WriteKafkaCrcs, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"copyRanges", nullptr, CopyRanges, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"klogOfKafka", nullptr, klog::KlogOfKafka, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"kafkaOfKlog", nullptr, klog::KafkaOfKlog, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
