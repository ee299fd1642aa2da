// klog's flusher: fdatasync(2) of segment files on threads of its own (docs/architecture.md,
// "Flush"), for Linux, part of the klog_sendfile addon.
//
// Why not libuv's thread pool: it has 4 threads by default, shared with the sendfile(2) copies
// of fetches (sendfile.cc) and the file operations of the logs. An fdatasync queued behind them
// waits for a thread, and with it every produce with acks 2 and every consumer waiting for the
// flushed end; and an fdatasync that takes long (a busy disk) holds a thread those need.
// Flushes therefore run on a small set of threads that do nothing else.
//
// Design:
// - One process-wide queue of jobs (fd → promise), served by `threads` worker threads (started
//   on the first call, more added when `setThreads` raises the count). At most `threads`
//   fdatasyncs run at once: with thousands of partitions a flush waits in the queue, and the
//   log it belongs to accumulates more appends meanwhile, so the next flush of that log carries
//   more (the queue is the group commit's back-pressure).
// - Completion goes back to the JS thread through one thread-safe function per Node.js
//   environment (main thread or worker thread), referenced only while jobs of that environment
//   are in flight, so an idle flusher never keeps a process alive and a pending one does.
// - Before each fdatasync the thread takes the file's size and inode (fstat); after a
//   successful one it records that size as synced for the inode. `syncedBytes(dev, ino)` lets a
//   test check, at the moment a log makes bytes visible, that they were on disk first.
// - State is allocated once and never freed: the threads outlive every environment and are
//   stopped by process exit.
#include <napi.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#ifdef __linux__
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace klog_flusher {

namespace {

/** fdatasync calls completed (successful or not), over the life of the process. */
std::atomic<uint64_t> syncCalls{0};
/** fdatasync calls that failed. */
std::atomic<uint64_t> syncErrors{0};
/** Jobs waiting or running. */
std::atomic<int64_t> inFlight{0};
/** Most jobs seen waiting or running at once. */
std::atomic<int64_t> maxInFlight{0};

#ifdef __linux__

struct EnvState;

struct Job {
  EnvState* env;
  int fd;
  Napi::Promise::Deferred deferred;
  int err = 0;
  Job(EnvState* e, int f, Napi::Promise::Deferred d) : env(e), fd(f), deferred(d) {}
};

/** Per Node.js environment: the way back to its JS thread. */
struct EnvState {
  Napi::ThreadSafeFunction tsfn;
  /** Jobs of this environment not yet completed; touched on the JS thread only. */
  int64_t pending = 0;
};

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job*> queue;
  int threads = 0;
  int wanted = 4;
  /** Synced size per file, keyed by (dev << 32) ^ ino; guarded by `mu`. */
  std::unordered_map<uint64_t, uint64_t> synced;
};

Shared& shared() {
  static Shared* s = new Shared();  // never freed: see the header comment
  return *s;
}

uint64_t FileKey(uint64_t dev, uint64_t ino) { return (dev << 32) ^ ino; }

void Complete(Napi::Env env, Napi::Function, Job* job) {
  EnvState* state = job->env;
  if (env != nullptr) {
    if (job->err == 0) {
      job->deferred.Resolve(env.Undefined());
    } else {
      Napi::Error e = Napi::Error::New(env, std::string("fdatasync: ") + std::strerror(job->err));
      e.Set("errno", Napi::Number::New(env, -job->err));
      e.Set("syscall", Napi::String::New(env, "fdatasync"));
      const char* code = job->err == EIO ? "EIO" : job->err == ENOSPC ? "ENOSPC" : job->err == EBADF ? "EBADF" : job->err == EDQUOT ? "EDQUOT" : "EUNKNOWN";
      e.Set("code", Napi::String::New(env, code));
      job->deferred.Reject(e.Value());
    }
    if (--state->pending == 0) state->tsfn.Unref(env);
  }
  delete job;
}

void WorkerLoop() {
  Shared& s = shared();
  for (;;) {
    Job* job;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return !s.queue.empty(); });
      job = s.queue.front();
      s.queue.pop_front();
    }
    struct stat st;
    bool statted = ::fstat(job->fd, &st) == 0;
    int r;
    do {
      r = ::fdatasync(job->fd);
    } while (r != 0 && errno == EINTR);
    job->err = r == 0 ? 0 : errno;
    if (r == 0 && statted) {
      std::lock_guard<std::mutex> lock(s.mu);
      uint64_t& v = s.synced[FileKey(st.st_dev, st.st_ino)];
      if (static_cast<uint64_t>(st.st_size) > v) v = static_cast<uint64_t>(st.st_size);
    }
    syncCalls.fetch_add(1, std::memory_order_relaxed);
    if (r != 0) syncErrors.fetch_add(1, std::memory_order_relaxed);
    inFlight.fetch_sub(1, std::memory_order_relaxed);
    EnvState* state = job->env;
    if (state->tsfn.BlockingCall(job, Complete) != napi_ok) delete job;  // environment gone
  }
}

/** Starts threads up to `wanted`; call with `mu` held. */
void StartThreadsLocked(Shared& s) {
  while (s.threads < s.wanted) {
    std::thread(WorkerLoop).detach();
    s.threads++;
  }
}

EnvState* StateOf(Napi::Env env) {
  EnvState* state = env.GetInstanceData<EnvState>();
  if (state != nullptr) return state;
  state = new EnvState();
  state->tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function(), "klog:fdatasync", 0, 1);
  state->tsfn.Unref(env);
  env.SetInstanceData<EnvState>(state);
  return state;
}

/** fdatasync(fd) → Promise<void>, on the flusher's threads; rejects with the errno as `code`. */
Napi::Value Fdatasync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "fd must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int64_t fd = info[0].As<Napi::Number>().Int64Value();
  if (fd < 0 || fd > 2147483647) {
    Napi::RangeError::New(env, "fd must be a non-negative integer").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  EnvState* state = StateOf(env);
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  Job* job = new Job(state, static_cast<int>(fd), deferred);
  if (state->pending++ == 0) state->tsfn.Ref(env);
  int64_t now = inFlight.fetch_add(1, std::memory_order_relaxed) + 1;
  int64_t seen = maxInFlight.load(std::memory_order_relaxed);
  while (now > seen && !maxInFlight.compare_exchange_weak(seen, now)) {
  }
  Shared& s = shared();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    StartThreadsLocked(s);
    s.queue.push_back(job);
  }
  s.cv.notify_one();
  return deferred.Promise();
}

/**
 * setFlushThreads(n): at most n fdatasyncs at once, 1 ≤ n ≤ 64. Before the first fdatasync any
 * count may be set; later, threads are only added, never removed. Returns the count in force.
 */
Napi::Value SetThreads(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "threads must be a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int64_t n = info[0].As<Napi::Number>().Int64Value();
  if (n < 1 || n > 64) {
    Napi::RangeError::New(env, "threads must be 1 to 64").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.threads == 0 || n > s.wanted) s.wanted = static_cast<int>(n);
  if (s.threads > 0) StartThreadsLocked(s);
  return Napi::Number::New(env, s.wanted);
}

/** syncedBytes(dev, ino) → the file size covered by the last successful fdatasync, or -1. */
Napi::Value SyncedBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "dev and ino must be numbers").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uint64_t dev = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
  uint64_t ino = static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value());
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.synced.find(FileKey(dev, ino));
  return Napi::Number::New(env, it == s.synced.end() ? -1.0 : static_cast<double>(it->second));
}

#endif  // __linux__

/** flusherStats() → { syncs, errors, inFlight, maxInFlight, threads }. */
Napi::Value Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("syncs", Napi::Number::New(env, static_cast<double>(syncCalls.load())));
  o.Set("errors", Napi::Number::New(env, static_cast<double>(syncErrors.load())));
  o.Set("inFlight", Napi::Number::New(env, static_cast<double>(inFlight.load())));
  o.Set("maxInFlight", Napi::Number::New(env, static_cast<double>(maxInFlight.load())));
#ifdef __linux__
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mu);
  o.Set("threads", Napi::Number::New(env, s.wanted));
#else
  o.Set("threads", Napi::Number::New(env, 0));
#endif
  return o;
}

}  // namespace

/** Adds the flusher's functions to the addon's exports. */
void Register(Napi::Env env, Napi::Object exports) {
#ifdef __linux__
  exports.Set("fdatasync", Napi::Function::New(env, Fdatasync, "fdatasync"));
  exports.Set("setFlushThreads", Napi::Function::New(env, SetThreads, "setFlushThreads"));
  exports.Set("syncedBytes", Napi::Function::New(env, SyncedBytes, "syncedBytes"));
#endif
  exports.Set("flusherStats", Napi::Function::New(env, Stats, "flusherStats"));
}

}  // namespace klog_flusher
