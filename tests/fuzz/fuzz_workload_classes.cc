// libFuzzer target: tebench's --workload_classes_json (bench::parseWorkloadClasses).
// Any text: no crash (deep nesting included), leak or undefined behaviour; a
// rejection starts with "workload_classes_json:"; accepted classes hold the
// parser's promises and, written back as JSON, parse to the same classes.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/tebench/workload_classes.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using tent::bench::WorkloadClass;

// Only the fields the input stated, so the "given" flags survive the trip.
nlohmann::json toJson(const WorkloadClass& c) {
  nlohmann::json j = {{"name", c.name},
                      {"threads", c.threads},
                      {"block_size", c.block_size},
                      {"batch_size", c.batch_size},
                      {"slo_us", c.slo_us},
                      {"weight", c.weight}};
  if (c.intent_given) j["intent_type"] = tent::bench::intentName(c.intent_type);
  if (c.deadline_given) j["deadline_us"] = c.deadline_us;
  if (c.poll_given) j["poll_mode"] = tent::bench::pollModeName(c.poll_mode);
  return j;
}

bool same(const WorkloadClass& a, const WorkloadClass& b) {
  return a.name == b.name && a.threads == b.threads && a.block_size == b.block_size &&
         a.batch_size == b.batch_size && a.intent_type == b.intent_type &&
         a.deadline_us == b.deadline_us && a.slo_us == b.slo_us && a.weight == b.weight &&
         a.poll_mode == b.poll_mode && a.intent_given == b.intent_given &&
         a.deadline_given == b.deadline_given && a.poll_given == b.poll_given;
}

void checkClasses(const std::vector<WorkloadClass>& classes) {
  FUZZ_CHECK(!classes.empty(), "accepted an empty class list");
  std::set<std::string> names;
  nlohmann::json written = nlohmann::json::array();
  for (const WorkloadClass& c : classes) {
    FUZZ_CHECK(!c.name.empty() && names.insert(c.name).second, "empty or duplicate name");
    FUZZ_CHECK(c.threads >= 1 && c.block_size >= 1 && c.batch_size >= 1, "a zero count");
    FUZZ_CHECK(c.weight > 0, "weight not > 0");
    written.push_back(toJson(c));
  }
  const std::string text = written.dump();
  auto again = tent::bench::parseWorkloadClasses(text);
  FUZZ_CHECK(again.ok(), "written classes do not parse: " + again.status().message() + "\n" + text);
  FUZZ_CHECK(again->size() == classes.size(), "written classes parse to another count");
  for (size_t i = 0; i < classes.size(); ++i) {
    FUZZ_CHECK(same((*again)[i], classes[i]), "class " + std::to_string(i) + " differs: " + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = tent::bench::parseWorkloadClasses(text);
  if (!parsed.ok()) {
    tent::fuzz::checkRejection(parsed.status(), "workload_classes_json: ");
    return 0;
  }
  checkClasses(*parsed);
  return 0;
}
