// A poller is one unit of run-to-completion work on an lcore.
#pragma once

#include <cstdint>
#include <string_view>

namespace tent::lcore {

enum class PollResult : uint8_t { kIdle = 0, kBusy = 1 };

class Poller {
 public:
  virtual ~Poller() = default;
  // Called only by the lcore the poller is attached to. Must not block.
  virtual PollResult poll_lc() noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
};

}  // namespace tent::lcore
