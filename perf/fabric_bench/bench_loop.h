// The measuring loop of fabric_bench (private to perf/fabric_bench).
#pragma once

#include <cstdint>
#include <vector>

#include "perf/fabric_bench/bench.h"

namespace tent::perf::fabric_bench {

uint64_t nowNs() noexcept;

struct Drive {
  uint64_t posted = 0;
  uint64_t outstanding = 0;
  uint64_t completed = 0;  // successful
  uint64_t errors = 0;
  fabric::WcStatus first_error = fabric::WcStatus::kSuccess;
  bool post_failed = false;
  bool cq_error = false;
  bool stopping = false;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // time of the last completion
};

class Loop {
 public:
  void prepare(Bench& bench, uint64_t size);
  // Runs until `max_wrs` WRs (0: no limit) or `duration_ns` (0: no limit) and
  // drains. Latencies in ns go to `samples` up to its capacity.
  Drive run(uint64_t max_wrs, uint64_t duration_ns, std::vector<uint32_t>* samples) noexcept;
  fabric::WcStatus once(uint32_t qp, fabric::WrOpcode opcode, uint64_t local, uint64_t remote,
                        uint64_t size) noexcept;

 private:
  struct Slot {
    fabric::SendWr wr;
    fabric::Sge sge;
    uint32_t qp = 0;
    uint64_t post_ns = 0;
  };
  bool post(Slot& slot) noexcept;
  bool postInitial(uint64_t max_wrs, Drive& d) noexcept;
  void complete(const fabric::WorkCompletion& wc, uint64_t t, uint64_t max_wrs,
                uint64_t duration_ns, std::vector<uint32_t>* samples, Drive& d) noexcept;

  Bench* bench_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Slot> slots_;
};

}  // namespace tent::perf::fabric_bench
