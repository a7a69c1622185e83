// Workload classes of tebench's QoS mode (--workload_classes_json): each class
// is a group of benchmark threads with its own block size, batch size, intent,
// deadline, SLO and weight. Parsing is strict: an unknown or malformed field is
// an error that names the class and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::bench {

// How a benchmark thread waits for its transfer.
enum class PollMode : uint8_t {
  kSpin,   // poll getTransferStatus back to back (what latency-sensitive callers do)
  kYield,  // std::this_thread::yield() between polls (a bulk caller sharing a small CPU)
  kWait,   // waitTransfer per task: the engine's waiter backs off to sleeps (a bulk
           // caller that blocks, as a socket's send() does)
};
Result<PollMode> parsePollMode(std::string_view text);
std::string_view pollModeName(PollMode mode) noexcept;

struct WorkloadClass {
  std::string name;
  uint32_t threads = 0;
  uint64_t block_size = 0;
  uint32_t batch_size = 1;
  IntentType intent_type = IntentType::UNSPEC;
  uint64_t deadline_us = 0;  // 0: no deadline; else deadline_ns = submit time + deadline_us
  uint64_t slo_us = 0;       // 0: no SLO (attainment 1, goodput = throughput)
  double weight = 1.0;
  // Mooncake's isolated_gbps: the class's throughput when it runs alone, for
  // isolation_leakage = max(0, 1 - throughput / isolated_gbps).
  std::optional<double> isolated_gbps;
  PollMode poll_mode = PollMode::kSpin;  // tent's addition
  // Whether the JSON stated the field; the global --tent_intent_type,
  // --deadline_us and --poll_mode apply to classes that leave them out.
  bool intent_given = false;
  bool deadline_given = false;
  bool poll_given = false;
};

// The keys a class object may carry, in the order the docs list them.
const std::vector<std::string>& workloadClassKeys();

// Parses "unspec", "foreground_get", "background_prefetch", "migration",
// "checkpoint", "weight_loading" (also their numeric values 0..5).
Result<IntentType> parseIntentName(std::string_view text);
std::string_view intentName(IntentType type) noexcept;

// True when the engine's automatic rule sends such a request to the direct path.
inline bool isLatencySensitive(IntentType intent, uint64_t deadline_us) noexcept {
  return deadline_us != 0 || intent == IntentType::FOREGROUND_GET;
}

// `arg` is inline JSON, or "@path" naming a file that holds it.
Result<std::string> loadWorkloadText(const std::string& arg);

// Parses a JSON array of class objects. Errors start with
// "workload_classes_json:" and name the class (index and name) and the field.
Result<std::vector<WorkloadClass>> parseWorkloadClasses(std::string_view json_text);

uint32_t totalThreads(const std::vector<WorkloadClass>& classes) noexcept;

}  // namespace tent::bench
