#include "model/host_registration.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "base/hex.h"
#include "model/rdma_context.h"
#include "tent/log.h"

namespace tent::rdma {

namespace {

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / double(uint64_t{1} << 30);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One device's share: its region of every chunk, in address order; stops at the
// first failure (the caller releases what was registered).
Status registerOnDevice(std::span<const HostChunk> chunks, RdmaContext& ctx, uint32_t access,
                        size_t device, ChunkRegions& mrs) {
  for (size_t c = 0; c < chunks.size(); ++c) {
    auto mr = ctx.device().registerMemory(reinterpret_cast<void*>(chunks[c].addr), chunks[c].length,
                                          access);
    if (!mr.ok()) {
      std::string where = chunks.size() > 1 ? "chunk " + std::to_string(c) + " of " +
                                                  std::to_string(chunks.size()) + " "
                                            : "";
      return mr.status().withContext("register memory " + where + "[" + hexAddr(chunks[c].addr) +
                                     ", +" + std::to_string(chunks[c].length) + ") on " +
                                     ctx.name());
    }
    mrs[c][device] = std::move(mr).value();
  }
  return Status::OK();
}

}  // namespace

std::vector<HostChunk> hostChunks(uint64_t addr, uint64_t length,
                                  std::span<RdmaContext* const> contexts) {
  uint64_t limit = UINT64_MAX;
  for (RdmaContext* ctx : contexts)
    limit = std::min<uint64_t>(limit, std::max<uint64_t>(ctx->device().info().max_mr_bytes, 1));
  std::vector<HostChunk> chunks;
  for (uint64_t off = 0; off < length;) {
    const uint64_t n = std::min(limit, length - off);
    chunks.push_back({addr + off, n});
    off += n;
  }
  return chunks;
}

Result<ChunkRegions> registerHostChunks(std::span<const HostChunk> chunks,
                                        std::span<RdmaContext* const> contexts, uint32_t access) {
  ChunkRegions mrs(chunks.size());
  for (auto& per_device : mrs) per_device.resize(contexts.size());
  uint64_t bytes = 0;
  for (const HostChunk& c : chunks) bytes += c.length;
  const bool progress = bytes >= kRegistrationProgressBytes;
  const auto start = std::chrono::steady_clock::now();
  if (progress) {
    TENT_INFO(kEngine, "registering %.1f GiB at %s on %zu devices in parallel (%zu chunks each)",
              gib(bytes), hexAddr(chunks.front().addr).c_str(), contexts.size(), chunks.size());
  }
  std::vector<Status> results(contexts.size());
  // Registration blocks in the kernel (pinning pages): one thread per device, not
  // one per core, so its own arena as wide as the devices (TBB may still run fewer
  // at once where the machine has fewer hardware threads).
  tbb::task_arena arena(static_cast<int>(std::max<size_t>(contexts.size(), 1)));
  // TBB joins its workers with its own atomics, which ThreadSanitizer does not see (libtbb
  // is not instrumented): a release per worker and the acquire below say it explicitly.
  std::atomic<size_t> finished{0};
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, contexts.size(), [&](size_t d) {
      results[d] = registerOnDevice(chunks, *contexts[d], access, d, mrs);
      if (progress && results[d].ok()) {
        TENT_INFO(kEngine, "registered %.1f GiB on %s in %.1f s", gib(bytes),
                  contexts[d]->name().c_str(), secondsSince(start));
      }
      finished.fetch_add(1, std::memory_order_release);
    });
  });
  (void)finished.load(std::memory_order_acquire);
  for (Status& s : results)
    if (!s.ok()) return s;  // `mrs` goes out of scope: every region is released
  if (progress) {
    TENT_INFO(kEngine, "registered %.1f GiB on %zu devices in %.1f s", gib(bytes), contexts.size(),
              secondsSince(start));
  }
  return mrs;
}

}  // namespace tent::rdma
