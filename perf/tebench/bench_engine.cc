#include "perf/tebench/bench_engine.h"

#include <cstring>

#include "tent/log.h"

namespace tent::bench {

BenchEngine::~BenchEngine() {
  if (engine && buffer) {
    // freeLocalMemory also deregisters what allocateLocalMemory registered.
    Status s = engine->freeLocalMemory(buffer);
    if (!s.ok()) TENT_WARN(kBench, "free buffer: %s", s.toString().c_str());
  }
  buffer = nullptr;
}

Result<std::unique_ptr<BenchEngine>> prepareBenchEngine(std::unique_ptr<TransferEngine> engine,
                                                        uint64_t buffer_size) {
  auto bench = std::make_unique<BenchEngine>();
  bench->engine = std::move(engine);
  auto memory = bench->engine->allocateLocalMemory(buffer_size);
  if (!memory.ok()) return memory.status().withContext("allocate the benchmark buffer");
  bench->buffer = static_cast<char*>(*memory);
  bench->buffer_size = buffer_size;
  // Touch every page now, so the measured window sees no first-touch faults.
  std::memset(bench->buffer, 0, bench->buffer_size);

  // allocateLocalMemory registers the memory on every device (the API says so).
  return bench;
}

Result<RemoteBuffer> openRemoteBuffer(TransferEngine& engine, const std::string& segment_name,
                                      uint64_t needed) {
  RemoteBuffer remote;
  auto id = engine.openSegment(segment_name);
  if (!id.ok()) return id.status().withContext("open segment " + segment_name);
  remote.segment = *id;
  auto buffers = engine.segmentBuffers(remote.segment);
  if (!buffers.ok()) return buffers.status().withContext("list buffers of " + segment_name);
  for (const auto& b : *buffers) {
    if (b.length > remote.length) {
      remote.addr = b.addr;
      remote.length = b.length;
    }
  }
  if (remote.length < needed) {
    return Status::OutOfRange("segment " + segment_name + " has no buffer of " +
                              std::to_string(needed) +
                              " bytes (largest: " + std::to_string(remote.length) +
                              "); start the target with a larger --total_buffer_size");
  }
  return remote;
}

}  // namespace tent::bench
