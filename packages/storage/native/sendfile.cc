// klog_sendfile: sends a range of a segment file to a TCP socket with sendfile(2) (docs/design.md §3,
// the read path), for Linux. Elsewhere the module loads but reports `supported: false`, and
// the JS side uses its read-and-write fallback.
//
// Design (why a worker thread, why dup, why no waiting here):
// - Node's sockets are non-blocking, and O_NONBLOCK lives on the open file description, so a
//   dup'd descriptor is non-blocking too. sendfile(2) on the socket therefore sends what fits
//   in the socket buffer and fails with EAGAIN when it is full.
// - Each call runs in a Napi::AsyncWorker on libuv's thread pool, so the event loop never blocks
//   on disk reads of pages not in the page cache. The worker only copies: it loops sendfile over
//   partial sends and returns at the first EAGAIN with the bytes sent so far and status
//   "waiting". It never waits for the socket: a pool thread held while a slow reader reads
//   would leave libuv's 4 threads to the slow readers, and every other pool operation (the file
//   operations of a topic's creation, a segment's roll) would queue behind them. The JS side
//   (send-region.ts) waits for writability on the event loop instead, through libuv's own
//   watcher of the socket, and calls again.
// - The worker writes to its own dup of the socket descriptor, taken on the JS thread when the
//   call starts and closed when the call ends. If JS destroys the socket meanwhile, the number
//   it closes cannot be reused under the worker (no stray writes into another file); the
//   connection itself stays open until the dup is closed, at most one copy later.
// - The file offset is passed explicitly (pread-like), so the segment's own file position is
//   never moved and appends to it are unaffected.
// - The caller must not write anything else to the socket while a call runs (klog writes the
//   response header and waits until it has left Node's buffers before sending the region).
#include <napi.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#ifdef __linux__
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>
#endif

namespace klog_flusher {
void Register(Napi::Env env, Napi::Object exports);
}

namespace {

/** Times a send had to wait for the socket (EAGAIN), over the life of the process. */
std::atomic<uint64_t> eagainCount{0};
/** sendfile(2) calls that moved bytes, over the life of the process. */
std::atomic<uint64_t> sendfileCalls{0};
/** Bytes moved by sendfile(2), over the life of the process. */
std::atomic<uint64_t> sendfileBytes{0};

#ifdef __linux__

/** Largest count one sendfile(2) call transfers on Linux. */
constexpr uint64_t kMaxChunk = 0x7ffff000;

enum class Status { Complete, EndOfFile, Waiting };

const char* StatusName(Status s) {
  switch (s) {
    case Status::Complete:
      return "complete";
    case Status::EndOfFile:
      return "eof";
    case Status::Waiting:
      return "waiting";
  }
  return "unknown";
}

const char* ErrnoName(int err) {
  switch (err) {
    case EPIPE:
      return "EPIPE";
    case ECONNRESET:
      return "ECONNRESET";
    case EBADF:
      return "EBADF";
    case EINVAL:
      return "EINVAL";
    case ENOTCONN:
      return "ENOTCONN";
    case EIO:
      return "EIO";
    case ENOMEM:
      return "ENOMEM";
    default:
      return "EUNKNOWN";
  }
}

class SendfileWorker : public Napi::AsyncWorker {
 public:
  SendfileWorker(Napi::Env env, int socketDup, int fileFd, uint64_t position, uint64_t length)
      : Napi::AsyncWorker(env, "klog:sendfile"),
        deferred_(Napi::Promise::Deferred::New(env)),
        socketFd_(socketDup),
        fileFd_(fileFd),
        position_(position),
        length_(length) {}

  ~SendfileWorker() override {
    if (socketFd_ >= 0) ::close(socketFd_);
  }

  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    while (sent_ < length_) {
      off_t offset = static_cast<off_t>(position_ + sent_);
      uint64_t chunk = length_ - sent_;
      if (chunk > kMaxChunk) chunk = kMaxChunk;
      ssize_t n = ::sendfile(socketFd_, fileFd_, &offset, static_cast<size_t>(chunk));
      if (n > 0) {
        sent_ += static_cast<uint64_t>(n);
        sendfileCalls.fetch_add(1, std::memory_order_relaxed);
        sendfileBytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        continue;
      }
      if (n == 0) {
        status_ = Status::EndOfFile;
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The socket is full: hand back to JS, which waits for it on the event loop.
        eagainCount.fetch_add(1, std::memory_order_relaxed);
        status_ = Status::Waiting;
        return;
      }
      errno_ = errno;
      return;
    }
    status_ = Status::Complete;
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (errno_ != 0) {
      Napi::Error err = Napi::Error::New(env, std::string("sendfile: ") + std::strerror(errno_));
      err.Set("code", Napi::String::New(env, ErrnoName(errno_)));
      err.Set("errno", Napi::Number::New(env, -errno_));
      err.Set("bytesSent", Napi::Number::New(env, static_cast<double>(sent_)));
      deferred_.Reject(err.Value());
      return;
    }
    Napi::Object result = Napi::Object::New(env);
    result.Set("bytes", Napi::Number::New(env, static_cast<double>(sent_)));
    result.Set("status", Napi::String::New(env, StatusName(status_)));
    deferred_.Resolve(result);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  int socketFd_;
  const int fileFd_;
  const uint64_t position_;
  const uint64_t length_;
  uint64_t sent_ = 0;
  Status status_ = Status::Complete;
  int errno_ = 0;
};

/** Reads argument `i` as a non-negative integer not above `max`; throws a TypeError otherwise. */
bool IntegerArg(const Napi::CallbackInfo& info, size_t i, double max, const char* name, double* out) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  double v = info[i].As<Napi::Number>().DoubleValue();
  if (!(v >= 0) || v > max || v != static_cast<double>(static_cast<uint64_t>(v))) {
    Napi::RangeError::New(info.Env(), std::string(name) + " must be a non-negative integer").ThrowAsJavaScriptException();
    return false;
  }
  *out = v;
  return true;
}

/**
 * sendfile(socketFd, fileFd, position, length) → Promise<{ bytes, status }>, on a pool thread.
 * `status` is "complete" (all `length` bytes sent), "eof" (the file ended first) or "waiting"
 * (the socket is full: wait until it is writable, then call again for the rest). Rejects with
 * an Error whose `code` is the errno name (EPIPE, ECONNRESET, ...) and `bytesSent` what was sent.
 */
Napi::Value Sendfile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double socketFd, fileFd, position, length;
  constexpr double maxSafe = 9007199254740991.0;
  if (!IntegerArg(info, 0, 2147483647.0, "socketFd", &socketFd) || !IntegerArg(info, 1, 2147483647.0, "fileFd", &fileFd) ||
      !IntegerArg(info, 2, maxSafe, "position", &position) || !IntegerArg(info, 3, maxSafe, "length", &length)) {
    return env.Undefined();
  }
  int dup = ::fcntl(static_cast<int>(socketFd), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    int e = errno;
    Napi::Error err = Napi::Error::New(env, std::string("sendfile: cannot dup the socket: ") + std::strerror(e));
    err.Set("code", Napi::String::New(env, ErrnoName(e)));
    err.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* worker = new SendfileWorker(env, dup, static_cast<int>(fileFd), static_cast<uint64_t>(position),
                                    static_cast<uint64_t>(length));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

#endif  // __linux__

/** stats() → { eagain, calls, bytes }: process-wide counters of the sendfile path. */
Napi::Value Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("eagain", Napi::Number::New(env, static_cast<double>(eagainCount.load())));
  o.Set("calls", Napi::Number::New(env, static_cast<double>(sendfileCalls.load())));
  o.Set("bytes", Napi::Number::New(env, static_cast<double>(sendfileBytes.load())));
  return o;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
#ifdef __linux__
  exports.Set("supported", Napi::Boolean::New(env, true));
  exports.Set("sendfile", Napi::Function::New(env, Sendfile, "sendfile"));
#else
  exports.Set("supported", Napi::Boolean::New(env, false));
#endif
  exports.Set("stats", Napi::Function::New(env, Stats, "stats"));
  klog_flusher::Register(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(klog_sendfile, Init)
