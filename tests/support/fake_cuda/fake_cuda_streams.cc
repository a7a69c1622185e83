// The fake CUDA driver: contexts, streams, copies, host functions and events.
#include <sys/mman.h>

#include <chrono>
#include <cstring>

#include "fake_cuda_internal.h"

namespace tent::cuda::testing {

namespace {

thread_local CUcontext t_current = nullptr;

struct FakeEvent {
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};

FakeCuda::State& st() {
  return fake().state();
}

// Runs `op` now, or queues it on `stream` when the fake defers stream work. The null
// stream (the legacy default stream) always runs at once.
void submit(CUstream stream, std::function<void()> op) {
  if (stream != nullptr && fake().options().deferred_streams) {
    std::lock_guard<std::mutex> lock(st().mu);
    reinterpret_cast<FakeCuda::Stream*>(stream)->ops.push_back(std::move(op));
    return;
  }
  op();
}

void drain(FakeCuda::Stream* s) {
  for (;;) {
    std::function<void()> op;
    {
      std::lock_guard<std::mutex> lock(st().mu);
      if (s->ops.empty()) return;
      op = std::move(s->ops.front());
      s->ops.pop_front();
    }
    op();  // outside the lock: a host function may call back into the fake
  }
}

bool knownStream(CUstream stream) {
  std::lock_guard<std::mutex> lock(st().mu);
  return st().streams.count(reinterpret_cast<FakeCuda::Stream*>(stream)) != 0;
}

CUresult primaryRetain(CUcontext* out, CUdevice dev) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuDevicePrimaryCtxRetain");
  if (dev < 0 || static_cast<size_t>(dev) >= st().context_refs.size())
    return CUDA_ERROR_INVALID_DEVICE;
  ++st().context_refs[dev];
  *out = reinterpret_cast<CUcontext>(&st().contexts[dev]);
  return CUDA_SUCCESS;
}

CUresult primaryRelease(CUdevice dev) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuDevicePrimaryCtxRelease");
  if (dev < 0 || static_cast<size_t>(dev) >= st().context_refs.size() ||
      st().context_refs[dev] == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  --st().context_refs[dev];
  return CUDA_SUCCESS;
}

CUresult setCurrent(CUcontext ctx) {
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult getCurrent(CUcontext* ctx) {
  *ctx = t_current;
  return CUDA_SUCCESS;
}

CUresult streamCreate(CUstream* out, unsigned) {
  auto* s = new FakeCuda::Stream();
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuStreamCreate");
  st().streams.insert(s);
  *out = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult streamSync(CUstream stream) {
  if (stream != nullptr && !knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream != nullptr) drain(reinterpret_cast<FakeCuda::Stream*>(stream));
  return CUDA_SUCCESS;
}

CUresult streamDestroy(CUstream stream) {
  if (!knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto* s = reinterpret_cast<FakeCuda::Stream*>(stream);
  drain(s);  // work queued before the destroy still completes, as on a GPU
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuStreamDestroy");
  st().streams.erase(s);
  delete s;
  return CUDA_SUCCESS;
}

CUresult memcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  if (stream != nullptr && !knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (fake().fail_memcpy.load() != CUDA_SUCCESS) return fake().fail_memcpy.load();
  {
    std::lock_guard<std::mutex> lock(st().mu);
    st().countLocked("cuMemcpyAsync");
    st().copies.push_back({dst, src, n, true});
  }
  submit(stream, [dst, src, n] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  });
  return CUDA_SUCCESS;
}

CUresult memcpySync(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  {
    std::lock_guard<std::mutex> lock(st().mu);
    st().countLocked("cuMemcpy");
    st().copies.push_back({dst, src, n, false});
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult memsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  std::memset(reinterpret_cast<void*>(dst), value, n);
  return CUDA_SUCCESS;
}

CUresult hostFunc(CUstream stream, CUhostFn fn, void* data) {
  if (stream != nullptr && !knownStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(st().mu);
    st().countLocked("cuLaunchHostFunc");
  }
  submit(stream, [fn, data] { fn(data); });
  return CUDA_SUCCESS;
}

// Pinned host memory: plain anonymous pages here, recorded so tests can tell a copy
// through a staging buffer from one that is not. Like the driver, it needs a context.
CUresult hostAlloc(void** out, size_t bytes, unsigned) {
  if (fake().fail_host_alloc.load() != CUDA_SUCCESS) return fake().fail_host_alloc.load();
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuMemHostAlloc");
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (currentGpuLocked() < 0) return CUDA_ERROR_INVALID_CONTEXT;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  st().pinned_host[reinterpret_cast<uint64_t>(p)] = bytes;
  *out = p;
  return CUDA_SUCCESS;
}

CUresult hostFree(void* p) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().countLocked("cuMemFreeHost");
  auto it = st().pinned_host.find(reinterpret_cast<uint64_t>(p));
  if (it == st().pinned_host.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, it->second);
  st().pinned_host.erase(it);
  return CUDA_SUCCESS;
}

CUresult eventCreate(CUevent* out, unsigned) {
  *out = reinterpret_cast<CUevent>(new FakeEvent());
  return CUDA_SUCCESS;
}

CUresult eventDestroy(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return CUDA_SUCCESS;
}

CUresult eventRecord(CUevent e, CUstream stream) {
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  submit(stream, [ev] {
    ev->at = std::chrono::steady_clock::now();
    ev->recorded = true;
  });
  return CUDA_SUCCESS;
}

CUresult eventSync(CUevent) {
  fake().runStreams();
  return CUDA_SUCCESS;
}

CUresult eventElapsed(float* ms, CUevent start, CUevent end) {
  const auto* a = reinterpret_cast<FakeEvent*>(start);
  const auto* b = reinterpret_cast<FakeEvent*>(end);
  if (!a->recorded || !b->recorded) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return CUDA_SUCCESS;
}

}  // namespace

int currentGpuLocked() {
  const auto* p = reinterpret_cast<const char*>(t_current);
  const char* first = st().contexts.data();
  if (p == nullptr || p < first || p >= first + st().context_refs.size()) return -1;
  return static_cast<int>(p - first);
}

void fillStreamEntries(CudaDriver& t, bool host_alloc) {
  if (host_alloc) {
    t.cuMemHostAlloc = hostAlloc;
    t.cuMemFreeHost = hostFree;
  }
  t.cuDevicePrimaryCtxRetain = primaryRetain;
  t.cuDevicePrimaryCtxRelease = primaryRelease;
  t.cuCtxSetCurrent = setCurrent;
  t.cuCtxGetCurrent = getCurrent;
  t.cuStreamCreate = streamCreate;
  t.cuStreamDestroy = streamDestroy;
  t.cuStreamSynchronize = streamSync;
  t.cuMemcpyAsync = memcpyAsync;
  t.cuMemcpy = memcpySync;
  t.cuMemsetD8 = memsetD8;
  t.cuLaunchHostFunc = hostFunc;
  t.cuEventCreate = eventCreate;
  t.cuEventDestroy = eventDestroy;
  t.cuEventRecord = eventRecord;
  t.cuEventSynchronize = eventSync;
  t.cuEventElapsedTime = eventElapsed;
}

void FakeCuda::runStreams() {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    streams.assign(state_->streams.begin(), state_->streams.end());
  }
  for (Stream* s : streams) drain(s);
}

size_t FakeCuda::queuedOps() {
  std::lock_guard<std::mutex> lock(state_->mu);
  size_t n = 0;
  for (const Stream* s : state_->streams) n += s->ops.size();
  return n;
}

}  // namespace tent::cuda::testing
