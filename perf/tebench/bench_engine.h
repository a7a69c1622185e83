// tebench's use of the engine: create it, allocate + register the buffer,
// open the target's segment and find its buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "perf/tebench/bench_options.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::bench {

struct BenchEngine {
  std::unique_ptr<TransferEngine> engine;
  char* buffer = nullptr;  // total_buffer_size bytes of engine memory, registered
  uint64_t buffer_size = 0;

  BenchEngine() = default;
  BenchEngine(BenchEngine&&) = default;
  BenchEngine& operator=(BenchEngine&&) = default;
  ~BenchEngine();  // frees the buffer before the engine goes
};

// Takes a created engine, allocates `buffer_size` bytes of engine memory
// (registered on every device by allocateLocalMemory) and touches every page (no first-touch faults
// while measuring). (TransferEngine::create() is called by main, so this file links without the
// engine library and tests can pass a fake engine.)
Result<std::unique_ptr<BenchEngine>> prepareBenchEngine(std::unique_ptr<TransferEngine> engine,
                                                        uint64_t buffer_size);

struct RemoteBuffer {
  SegmentId segment = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
};

// Opens the target's segment and picks its largest buffer; it must hold
// `needed` bytes.
Result<RemoteBuffer> openRemoteBuffer(TransferEngine& engine, const std::string& segment_name,
                                      uint64_t needed);

}  // namespace tent::bench
