// The conversions between Kafka message sets (magic 0 and 1) and klog message sets that the
// Kafka listener does for every Produce and Fetch (docs/kafka-protocol.md, "Messages"), one pass
// and one call per set: see packages/kafka-protocol/src/klog-bridge.ts, which calls them and keeps
// the JavaScript path for everything they leave to it (compressed messages, damaged bytes, whose
// errors it reports). Every length is checked against the range before it is used, so no input
// makes them read or write outside the buffers given.
#include <cstring>

#include "messages.h"

namespace klog {

namespace {
/** A Uint8Array argument: its bytes, or false after throwing TypeError. */
bool GetBytes(napi_env env, napi_value v, uint8_t** data, size_t* length) {
  napi_typedarray_type type;
  void* d;
  bool isTypedArray = false;
  if (napi_is_typedarray(env, v, &isTypedArray) != napi_ok || !isTypedArray ||
      napi_get_typedarray_info(env, v, &type, length, &d, nullptr, nullptr) != napi_ok || type != napi_uint8_array) {
    return false;
  }
  *data = static_cast<uint8_t*>(d);
  return true;
}

/** An integer argument in [0, max], or false. */
bool GetIndex(napi_env env, napi_value v, size_t max, size_t* out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0 && d <= static_cast<double>(max)) ||
      d != static_cast<double>(static_cast<size_t>(d))) {
    return false;
  }
  *out = static_cast<size_t>(d);
  return true;
}

int32_t ReadInt32BE(const uint8_t* p) { return static_cast<int32_t>(ReadUint32BE(p)); }
uint32_t ReadUint16BE(const uint8_t* p) { return (static_cast<uint32_t>(p[0]) << 8) | p[1]; }
int64_t ReadInt64BE(const uint8_t* p) {
  return static_cast<int64_t>((static_cast<uint64_t>(ReadUint32BE(p)) << 32) | ReadUint32BE(p + 4));
}
void WriteUint16BE(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void WriteInt64BE(uint8_t* p, int64_t v) {
  WriteUint32BE(p, static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32));
  WriteUint32BE(p + 4, static_cast<uint32_t>(v));
}

/** The largest integer JavaScript reads back exactly, 2^53 - 1: timestamps beyond ±it are refused. */
constexpr int64_t kMaxSafe = (int64_t{1} << 53) - 1;
/** klog's message magic, its header attribute (bit 2), codec bits and header tags (src/message.ts, src/message-header.ts). */
constexpr uint8_t kKlogMagic = 1;
constexpr uint8_t kHeaderAttribute = 0x04;
constexpr uint8_t kKlogCodecMask = 0x03;
constexpr uint8_t kTagKey = 1;
constexpr uint8_t kTagTimestamp = 2;
constexpr size_t kMaxHeaderFields = 0xffff;

}  // namespace

/**
 * klogOfKafka(src, start, end, dst, at) → the position in dst after the klog message set
 * written at dst[at] for the Kafka message set src[start, end) (magic 0 or 1, uncompressed):
 * each message's CRC, magic, timestamp and lengths checked, its key and timestamp put in a klog
 * metadata header (tag 1 key, then tag 2 timestamp; none for neither), a null value stored as an
 * empty one, and the klog CRC filled; what @klog/kafka-protocol's klogMessageSetOfKafka does in
 * JavaScript, in one pass. -1 when any message is not one it converts (damaged, compressed, a
 * header over 65535 bytes, dst too short): the caller takes the JavaScript path, which says
 * why or inflates the wrapper. src and dst must not overlap.
 */
napi_value KlogOfKafka(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  uint8_t *src, *dst;
  size_t srcLength, dstLength, start, end, at;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 5 ||
      !GetBytes(env, argv[0], &src, &srcLength) || !GetBytes(env, argv[3], &dst, &dstLength)) {
    napi_throw_type_error(env, nullptr, "expected (src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number)");
    return nullptr;
  }
  if (!GetIndex(env, argv[2], srcLength, &end) || !GetIndex(env, argv[1], end, &start) || !GetIndex(env, argv[4], dstLength, &at)) {
    napi_throw_range_error(env, nullptr, "start, end and at must be integers with 0 <= start <= end <= src.length, at <= dst.length");
    return nullptr;
  }
  size_t pos = start, out = at;
  while (pos < end) {
    if (end - pos < kKafkaLogOverhead) return Number(env, -1);
    const uint8_t* m = src + pos;
    int32_t size = ReadInt32BE(m + 8);
    if (size < static_cast<int32_t>(kKafkaMinSize) || static_cast<size_t>(size) > end - pos - kKafkaLogOverhead) return Number(env, -1);
    size_t mEnd = pos + kKafkaLogOverhead + static_cast<size_t>(size);
    if (Crc(m + 16, static_cast<size_t>(size) - 4) != ReadUint32BE(m + 12)) return Number(env, -1);
    uint8_t magic = m[16];
    if (magic > 1 || (m[17] & 0x07) != 0) return Number(env, -1);
    size_t p = pos + 18;
    bool hasTimestamp = false;
    size_t timestampAt = 0;
    if (magic == 1) {
      if (mEnd - p < 8) return Number(env, -1);
      int64_t t = ReadInt64BE(src + p);
      if (t >= 0 && t <= kMaxSafe) {
        hasTimestamp = true;
        timestampAt = p;
      } else if (t != -1) {
        return Number(env, -1);
      }
      p += 8;
    }
    if (mEnd - p < 4) return Number(env, -1);
    int32_t keyBytes = ReadInt32BE(src + p);
    if (keyBytes < -1 || static_cast<int64_t>(keyBytes) > static_cast<int64_t>(mEnd - p - 4)) return Number(env, -1);
    size_t keyStart = p + 4;
    p += 4 + static_cast<size_t>(keyBytes < 0 ? 0 : keyBytes);
    if (mEnd - p < 4) return Number(env, -1);
    int32_t valueBytes = ReadInt32BE(src + p);
    if (valueBytes < -1 || static_cast<int64_t>(valueBytes) > static_cast<int64_t>(mEnd - p - 4)) return Number(env, -1);
    size_t valueStart = p + 4;
    size_t value = static_cast<size_t>(valueBytes < 0 ? 0 : valueBytes);
    if (p + 4 + value != mEnd) return Number(env, -1);
    size_t key = static_cast<size_t>(keyBytes < 0 ? 0 : keyBytes);
    size_t fields = (keyBytes >= 0 ? 3 + key : 0) + (hasTimestamp ? 3 + 8 : 0);
    if (fields > kMaxHeaderFields) return Number(env, -1);
    size_t klogSize = kOverhead + (fields > 0 ? 2 + fields : 0) + value;
    if (dstLength - out < klogSize) return Number(env, -1);
    uint8_t* o = dst + out;
    WriteUint32BE(o, static_cast<uint32_t>(klogSize - 4));
    o[4] = kKlogMagic;
    o[5] = fields > 0 ? kHeaderAttribute : 0;
    uint8_t* q = o + kOverhead;
    if (fields > 0) {
      WriteUint16BE(q, static_cast<uint32_t>(fields));
      q += 2;
      if (keyBytes >= 0) {
        q[0] = kTagKey;
        WriteUint16BE(q + 1, static_cast<uint32_t>(key));
        memcpy(q + 3, src + keyStart, key);
        q += 3 + key;
      }
      if (hasTimestamp) {
        q[0] = kTagTimestamp;
        WriteUint16BE(q + 1, 8);
        memcpy(q + 3, src + timestampAt, 8);
        q += 3 + 8;
      }
    }
    memcpy(q, src + valueStart, value);
    WriteUint32BE(o + kCrcAt, Crc(o + kOverhead, klogSize - kOverhead));
    out += klogSize;
    pos = mEnd;
  }
  return Number(env, static_cast<double>(out));
}

/** Why kafkaOfKlog stopped (its return value). */
namespace {

enum KafkaOfKlogStop : int {
  /** It re-framed every message of the range. */
  kWhole = 0,
  /** At bytes that are not a whole message of sound framing (a partial tail, or damage). */
  kNotWhole = 1,
  /** dst had no room for the next message. */
  kNoRoom = 2,
  /** At a message it does not re-frame: a bad CRC, a compressed message, a bad metadata header. */
  kNotPlain = 3,
};

/**
 * kafkaOfKlog(src, start, end, dst, at, baseOffset, magic, result) → why it stopped
 * (KafkaOfKlogStop): re-frames the uncompressed klog messages of src[start, end), read from the
 * log at byte offset baseOffset, as Kafka messages of `magic` (0 or 1) written from dst[at], each
 * with offset baseOffset + its position after start, key and timestamp from its metadata
 * header (the last field of a tag wins; no timestamp is -1), every klog CRC checked and every
 * Kafka CRC filled: what @klog/kafka-protocol's kafkaMessageSetOf does for a plain set, in one
 * pass. result (a Float64Array of 4) gets the position in src where it stopped, the position in
 * dst after the last message written, the messages written and the position in src of the last
 * (-1 for none). src and dst must not overlap.
 */
}  // namespace

napi_value KafkaOfKlog(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  uint8_t *src, *dst;
  size_t srcLength, dstLength, start, end, at;
  double baseOffset, magicArg;
  napi_typedarray_type rt;
  size_t rl;
  void* rd;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 8 ||
      !GetBytes(env, argv[0], &src, &srcLength) || !GetBytes(env, argv[3], &dst, &dstLength) ||
      napi_get_value_double(env, argv[5], &baseOffset) != napi_ok || napi_get_value_double(env, argv[6], &magicArg) != napi_ok ||
      napi_get_typedarray_info(env, argv[7], &rt, &rl, &rd, nullptr, nullptr) != napi_ok || rt != napi_float64_array || rl < 4) {
    napi_throw_type_error(env, nullptr,
                          "expected (src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number, baseOffset: number, magic: 0 | 1, result: Float64Array(4))");
    return nullptr;
  }
  if (!GetIndex(env, argv[2], srcLength, &end) || !GetIndex(env, argv[1], end, &start) || !GetIndex(env, argv[4], dstLength, &at) ||
      !(baseOffset >= 0 && baseOffset + static_cast<double>(end - start) <= static_cast<double>(kMaxSafe)) ||
      baseOffset != static_cast<double>(static_cast<int64_t>(baseOffset)) || (magicArg != 0 && magicArg != 1)) {
    napi_throw_range_error(env, nullptr, "start, end, at must be integers within src and dst, baseOffset a safe integer, magic 0 or 1");
    return nullptr;
  }
  const int64_t base = static_cast<int64_t>(baseOffset);
  const uint8_t magic = static_cast<uint8_t>(magicArg);
  double* result = static_cast<double*>(rd);
  size_t pos = start, out = at, count = 0;
  double last = -1;
  int stop = kWhole;
  while (pos < end) {
    const uint8_t* m = src + pos;
    int32_t length = end - pos >= kOverhead ? ReadInt32BE(m) : 0;
    if (length < static_cast<int32_t>(kHeader) || m[4] != kKlogMagic || static_cast<size_t>(length) > end - pos - 4) {
      stop = kNotWhole;
      break;
    }
    size_t mEnd = pos + 4 + static_cast<size_t>(length);
    uint8_t attributes = m[5];
    if ((attributes & kKlogCodecMask) != 0 || Crc(m + kOverhead, static_cast<size_t>(length) - kHeader) != ReadUint32BE(m + kCrcAt)) {
      stop = kNotPlain;
      break;
    }
    size_t keyStart = 0, keyEnd = 0, valueStart = pos + kOverhead;
    bool hasKey = false;
    int64_t timestamp = -1;
    if ((attributes & kHeaderAttribute) != 0) {
      size_t h = pos + kOverhead;
      size_t headerEnd = mEnd - h >= 2 ? h + 2 + ReadUint16BE(src + h) : SIZE_MAX;
      bool bad = headerEnd > mEnd;
      for (size_t q = h + 2; !bad && q < headerEnd;) {
        if (headerEnd - q < 3) {
          bad = true;
          break;
        }
        uint8_t tag = src[q];
        size_t n = ReadUint16BE(src + q + 1);
        q += 3;
        if (headerEnd - q < n) {
          bad = true;
          break;
        }
        if (tag == kTagKey) {
          hasKey = true;
          keyStart = q;
          keyEnd = q + n;
        } else if (tag == kTagTimestamp) {
          int64_t t = n == 8 ? ReadInt64BE(src + q) : 0;
          if (n != 8 || t < -kMaxSafe || t > kMaxSafe) {
            bad = true;
            break;
          }
          timestamp = t;
        }
        q += n;
      }
      if (bad) {
        stop = kNotPlain;
        break;
      }
      valueStart = headerEnd;
    }
    size_t key = keyEnd - keyStart, value = mEnd - valueStart;
    size_t size = kKafkaLogOverhead + 4 + 1 + 1 + (magic == 1 ? 8 : 0) + 4 + key + 4 + value;
    if (dstLength - out < size) {
      stop = kNoRoom;
      break;
    }
    uint8_t* o = dst + out;
    WriteInt64BE(o, base + static_cast<int64_t>(pos - start));
    WriteUint32BE(o + 8, static_cast<uint32_t>(size - kKafkaLogOverhead));
    o[16] = magic;
    o[17] = 0;
    uint8_t* q = o + 18;
    if (magic == 1) {
      WriteInt64BE(q, timestamp);
      q += 8;
    }
    WriteUint32BE(q, hasKey ? static_cast<uint32_t>(key) : 0xffffffffu);
    q += 4;
    if (hasKey) memcpy(q, src + keyStart, key);
    q += key;
    WriteUint32BE(q, static_cast<uint32_t>(value));
    memcpy(q + 4, src + valueStart, value);
    WriteUint32BE(o + kKafkaLogOverhead, Crc(o + kKafkaLogOverhead + 4, size - kKafkaLogOverhead - 4));
    last = static_cast<double>(pos);
    out += size;
    count++;
    pos = mEnd;
  }
  result[0] = static_cast<double>(pos);
  result[1] = static_cast<double>(out);
  result[2] = static_cast<double>(count);
  result[3] = last;
  return Number(env, stop);
}
}  // namespace klog
