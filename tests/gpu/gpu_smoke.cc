// The GPU smoke test (suite gpu, scripts/gpu-smoke.sh): two processes on one GPU,
// the soft provider between them (CUDA IPC) or the tcp provider (staging through
// pinned host buffers), GPU->GPU and host<->GPU WRITE and READ with the bytes checked
// in device memory, then 4 MiB GPU->GPU bandwidth through the engine next to the
// driver's own device-to-device copy, in the same run.
// Exits 77 (skipped) where the CUDA driver or a GPU is missing.
//   gpu_smoke [--provider soft|tcp]            the initiator; starts the target itself
//   gpu_smoke --target [soft|tcp]              the target: serves FILL / CHECK / QUIT on stdin
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "tent/transfer_engine.h"

namespace {

using tent::OpCode;
using tent::Request;
using tent::TransferEngine;
namespace cuda = tent::cuda;

constexpr size_t kSize = 16 << 20;
constexpr size_t kBandwidthBytes = 4 << 20;
constexpr int kBandwidthIters = 50;

// The provider both processes use: "soft" or "tcp".
std::string g_provider = "soft";

std::string engineYaml() {
  const std::string fabric = g_provider == "tcp"
                                 ? "fabric: {provider: tcp, tcp: {devices: [{name: tcp0}]}}"
                                 : "fabric: {provider: soft, soft: {devices: [{name: soft0}]}}";
  return fabric + R"(
lcores: [{pollers: ["rail:*", background]}]
bootstrap: {listen: "127.0.0.1:0"}
workers: {block_size: 1048576, slice_timeout_ms: 20000}
log: {level: warn}
)";
}

// ---- device memory as bytes on the host ------------------------------------------------

bool isDevice(const void* p) {
  auto info = cuda::classify(p);
  return info.ok() && info->kind == cuda::MemoryKind::kDevice;
}

// Copies between host and any memory (device memory through the driver).
bool copyBytes(void* dst, const void* src, size_t n) {
  if (!isDevice(dst) && !isDevice(src)) {
    std::memcpy(dst, src, n);
    return true;
  }
  auto d = cuda::driver();
  auto scope = cuda::ScopedContext::enter(0);
  return d.ok() && scope.ok() &&
         (*d)->cuMemcpy(reinterpret_cast<cuda::CUdeviceptr>(dst),
                        reinterpret_cast<cuda::CUdeviceptr>(src), n) == cuda::CUDA_SUCCESS;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

bool fill(void* p, size_t n, uint32_t seed) {
  auto v = pattern(n, seed);
  return copyBytes(p, v.data(), n);
}

// Index of the first byte that differs from the pattern (read from device memory
// through the driver), -1 when all match, -2 when it could not be read.
long check(const void* p, size_t n, uint32_t seed) {
  std::vector<uint8_t> got(n);
  if (!copyBytes(got.data(), p, n)) return -2;
  auto want = pattern(n, seed);
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) return static_cast<long>(i);
  return -1;
}

// ---- the target process ---------------------------------------------------------------------

int target() {
  auto engine = TransferEngine::createFromYaml(engineYaml());
  if (!engine.ok()) {
    std::fprintf(stderr, "target: %s\n", engine.status().toString().c_str());
    return 1;
  }
  auto gpu = (*engine)->allocateLocalMemory(kSize, "cuda:0");
  auto host = (*engine)->allocateLocalMemory(kSize, "cpu:0");
  // Memory the application allocated itself (cuMemAlloc): shared through legacy IPC.
  auto d = cuda::driver();
  cuda::CUdeviceptr app = 0;
  {
    auto scope = cuda::ScopedContext::enter(0);
    if (d.ok() && scope.ok()) (void)(*d)->cuMemAlloc(&app, kSize);
  }
  if (!gpu.ok() || !host.ok() || app == 0 ||
      !(*engine)->registerLocalMemory(reinterpret_cast<void*>(app), kSize).ok()) {
    std::fprintf(stderr, "target: allocating or registering memory failed: %s %s\n",
                 gpu.status().toString().c_str(), host.status().toString().c_str());
    return 1;
  }
  std::printf("READY %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", (*engine)->segmentName().c_str(),
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*gpu)),
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*host)),
              static_cast<uint64_t>(app));
  std::fflush(stdout);
  char cmd[16];
  uint64_t addr = 0, len = 0;
  unsigned seed = 0;
  while (std::scanf("%15s %" SCNu64 " %" SCNu64 " %u", cmd, &addr, &len, &seed) == 4) {
    void* p = reinterpret_cast<void*>(addr);
    if (std::strcmp(cmd, "FILL") == 0) {
      std::printf("%d\n", fill(p, len, seed) ? 0 : 1);
    } else if (std::strcmp(cmd, "CHECK") == 0) {
      std::printf("%ld\n", check(p, len, seed));
    } else {
      break;
    }
    std::fflush(stdout);
  }
  (void)(*engine)->unregisterLocalMemory(reinterpret_cast<void*>(app));
  auto scope = cuda::ScopedContext::enter(0);
  if (scope.ok()) (void)(*d)->cuMemFree(app);
  return 0;
}

// ---- the initiator ------------------------------------------------------------------------------

struct Target {
  pid_t pid = -1;
  FILE* in = nullptr;   // its stdin
  FILE* out = nullptr;  // its stdout
  std::string segment;
  uint64_t gpu = 0, host = 0, app = 0;

  long ask(const char* cmd, uint64_t addr, uint64_t len, unsigned seed) {
    std::fprintf(in, "%s %" PRIu64 " %" PRIu64 " %u\n", cmd, addr, len, seed);
    std::fflush(in);
    long answer = -3;
    return std::fscanf(out, "%ld", &answer) == 1 ? answer : -3;
  }
};

bool startTarget(const char* self, Target* t) {
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0) return false;
  t->pid = fork();
  if (t->pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    execl(self, self, "--target", g_provider.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  t->in = fdopen(to[1], "w");
  t->out = fdopen(from[0], "r");
  char seg[256];
  return std::fscanf(t->out, "READY %255s %" SCNu64 " %" SCNu64 " %" SCNu64, seg, &t->gpu, &t->host,
                     &t->app) == 4 &&
         (t->segment = seg, true);
}

bool transfer(TransferEngine& e, tent::SegmentId seg, OpCode op, void* local, uint64_t remote,
              size_t n) {
  auto batch = e.allocateBatch(1);
  if (!batch.ok()) return false;
  Request r;
  r.opcode = op;
  r.source = local;
  r.target_id = seg;
  r.target_offset = remote;
  r.length = n;
  bool ok = e.submitTransfer(*batch, {&r, 1}).ok();
  if (ok) {
    auto st = e.waitTransfer(*batch, 0, 30'000'000'000ull);
    ok = st.ok() && st->state == tent::TransferState::COMPLETED;
    if (!st.ok()) std::fprintf(stderr, "  wait: %s\n", st.status().toString().c_str());
  }
  (void)e.freeBatch(*batch);
  return ok;
}

// One case: fill the source, clear the destination, move, check the destination.
bool runCase(TransferEngine& e, tent::SegmentId seg, Target& t, const char* name, OpCode op,
             void* local, uint64_t remote, unsigned seed) {
  const size_t n = 3 * kBandwidthBytes + 4096;  // several slices and a short tail
  bool ok = true;
  long where = 0;
  if (op == OpCode::WRITE) {
    ok = fill(local, n, seed) && t.ask("FILL", remote, n, seed + 1000) == 0 &&
         transfer(e, seg, op, local, remote, n);
    where = ok ? t.ask("CHECK", remote, n, seed) : -3;
  } else {
    ok = t.ask("FILL", remote, n, seed) == 0 && fill(local, n, seed + 1000) &&
         transfer(e, seg, op, local, remote, n);
    where = ok ? check(local, n, seed) : -3;
  }
  ok = ok && where == -1;
  std::printf("  %-34s %s", name, ok ? "ok" : "FAILED");
  if (!ok && where >= 0) std::printf(" (first wrong byte at %ld)", where);
  std::printf("\n");
  return ok;
}

double engineBandwidth(TransferEngine& e, tent::SegmentId seg, void* local, uint64_t remote) {
  (void)transfer(e, seg, OpCode::WRITE, local, remote, kBandwidthBytes);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBandwidthIters; ++i)
    if (!transfer(e, seg, OpCode::WRITE, local, remote, kBandwidthBytes)) return 0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return kBandwidthBytes * double(kBandwidthIters) / s / 1e9;
}

// The driver's own device-to-device copy of the same size, timed with events.
double driverBandwidth(void* a, void* b) {
  auto d = cuda::driver();
  auto scope = cuda::ScopedContext::enter(0);
  if (!d.ok() || !scope.ok()) return 0;
  const cuda::CudaDriver& x = **d;
  cuda::CUstream s = nullptr;
  cuda::CUevent e0 = nullptr, e1 = nullptr;
  if (x.cuStreamCreate(&s, cuda::CU_STREAM_NON_BLOCKING) != cuda::CUDA_SUCCESS) return 0;
  x.cuEventCreate(&e0, cuda::CU_EVENT_DEFAULT);
  x.cuEventCreate(&e1, cuda::CU_EVENT_DEFAULT);
  const auto da = reinterpret_cast<cuda::CUdeviceptr>(a),
             db = reinterpret_cast<cuda::CUdeviceptr>(b);
  x.cuMemcpyAsync(db, da, kBandwidthBytes, s);  // warm-up
  x.cuEventRecord(e0, s);
  for (int i = 0; i < kBandwidthIters; ++i) x.cuMemcpyAsync(db, da, kBandwidthBytes, s);
  x.cuEventRecord(e1, s);
  x.cuEventSynchronize(e1);
  float ms = 0;
  x.cuEventElapsedTime(&ms, e0, e1);
  x.cuEventDestroy(e0);
  x.cuEventDestroy(e1);
  x.cuStreamDestroy(s);
  return ms > 0 ? kBandwidthBytes * double(kBandwidthIters) / (ms / 1e3) / 1e9 : 0;
}

int initiator(const char* self) {
  auto gpus = cuda::deviceCount();
  if (!gpus.ok() || *gpus == 0) {
    std::printf("gpu_smoke: skipped: %s\n",
                gpus.ok() ? "the CUDA driver sees no GPU" : gpus.status().message().c_str());
    return 77;
  }
  auto engine = TransferEngine::createFromYaml(engineYaml());
  if (!engine.ok()) {
    std::fprintf(stderr, "gpu_smoke: %s\n", engine.status().toString().c_str());
    return 1;
  }
  TransferEngine& e = **engine;
  auto gpu = e.allocateLocalMemory(kSize, "cuda:0");
  auto gpu2 = e.allocateLocalMemory(kSize, "cuda:0");
  auto host = e.allocateLocalMemory(kSize, "cpu:0");
  if (!gpu.ok() || !gpu2.ok() || !host.ok()) {
    std::fprintf(stderr, "gpu_smoke: allocate: %s\n", gpu.status().toString().c_str());
    return 1;
  }
  Target t;
  if (!startTarget(self, &t)) {
    std::fprintf(stderr, "gpu_smoke: the target process did not start\n");
    return 1;
  }
  auto seg = e.openSegment(t.segment);
  bool ok = seg.ok();
  if (!ok)
    std::fprintf(stderr, "gpu_smoke: open %s: %s\n", t.segment.c_str(),
                 seg.status().toString().c_str());
  const char* how = g_provider == "tcp" ? "tcp, pinned staging buffers" : "soft, CUDA IPC";
  std::printf("gpu_smoke: %d GPU(s); two processes over the %s provider (%s)\n", *gpus,
              g_provider.c_str(), how);
  if (ok) {
    ok &= runCase(e, *seg, t, "WRITE GPU -> peer GPU (VMM)", OpCode::WRITE, *gpu, t.gpu, 1);
    ok &= runCase(e, *seg, t, "READ  peer GPU (VMM) -> GPU", OpCode::READ, *gpu, t.gpu, 2);
    ok &= runCase(e, *seg, t, "WRITE GPU -> peer GPU (cuMemAlloc)", OpCode::WRITE, *gpu, t.app, 3);
    ok &= runCase(e, *seg, t, "READ  peer GPU (cuMemAlloc) -> GPU", OpCode::READ, *gpu, t.app, 4);
    ok &= runCase(e, *seg, t, "WRITE host -> peer GPU", OpCode::WRITE, *host, t.gpu, 5);
    ok &= runCase(e, *seg, t, "READ  peer GPU -> host", OpCode::READ, *host, t.gpu, 6);
    ok &= runCase(e, *seg, t, "WRITE GPU -> peer host", OpCode::WRITE, *gpu, t.host, 7);
    ok &= runCase(e, *seg, t, "READ  peer host -> GPU", OpCode::READ, *gpu, t.host, 8);
  }
  if (ok) {
    const double engine_rate = engineBandwidth(e, *seg, *gpu, t.gpu);
    const double drv = driverBandwidth(*gpu, *gpu2);
    std::printf(
        "bandwidth, 4 MiB GPU->GPU WRITE: engine (%s) %.2f GB/s; "
        "driver cuMemcpyAsync device-to-device %.2f GB/s; ratio %.2f\n",
        how, engine_rate, drv, drv > 0 ? engine_rate / drv : 0.0);
  }
  std::fprintf(t.in, "QUIT 0 0 0\n");
  std::fclose(t.in);
  int status = 0;
  waitpid(t.pid, &status, 0);
  const bool target_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!target_ok) std::fprintf(stderr, "gpu_smoke: the target exited with status %d\n", status);
  std::printf("gpu_smoke: %s\n", ok && target_ok ? "PASS" : "FAIL");
  return ok && target_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--target") == 0) {
    if (argc > 2) g_provider = argv[2];
    return target();
  }
  if (argc > 2 && std::strcmp(argv[1], "--provider") == 0) g_provider = argv[2];
  if (g_provider != "soft" && g_provider != "tcp") {
    std::fprintf(stderr, "gpu_smoke: --provider is soft or tcp, got %s\n", g_provider.c_str());
    return 2;
  }
  return initiator("/proc/self/exe");
}
