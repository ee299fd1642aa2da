// Shared by klog_crc32's sources (crc32.cc, kafka-messages.cc): klog's message layout
// (docs/design.md §1: `length int32 | magic | attributes | crc uint32 | payload`), Kafka's of magic
// 0 and 1 (packages/kafka-protocol/src/message-set.ts), big-endian helpers and the CRC.
#ifndef KLOG_MESSAGES_H_
#define KLOG_MESSAGES_H_

#include <node_api.h>

#include <cstddef>
#include <cstdint>

extern "C" {
#include <isa-l/crc.h>
}

namespace klog {


/** Bytes of a message before its payload: length 4, magic 1, attributes 1, crc 4. */
constexpr size_t kOverhead = 10;
/** Bytes the length field counts beyond the payload: magic, attributes, crc. */
constexpr uint32_t kHeader = 6;
/** Where the crc field is, from the start of the message. */
constexpr size_t kCrcAt = 6;

inline uint32_t ReadUint32BE(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

inline void WriteUint32BE(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

inline uint32_t Crc(const uint8_t* p, size_t n) { return crc32_gzip_refl(0, p, n); }

inline napi_value Number(napi_env env, double v) {
  napi_value out;
  napi_create_double(env, v, &out);
  return out;
}

/** Bytes of a Kafka message (magic 0 or 1) before its crc: offset int64, message_size int32. */
constexpr size_t kKafkaLogOverhead = 12;
/** Bytes of the smallest Kafka message_size: crc, magic, attributes, key and value lengths. */
constexpr uint32_t kKafkaMinSize = 14;

/** klogOfKafka(src, start, end, dst, at): see kafka-messages.cc. */
napi_value KlogOfKafka(napi_env env, napi_callback_info info);
/** kafkaOfKlog(src, start, end, dst, at, baseOffset, magic, result): see kafka-messages.cc. */
napi_value KafkaOfKlog(napi_env env, napi_callback_info info);

}  // namespace klog

#endif  // KLOG_MESSAGES_H_
