// libFuzzer target: the YAML config a user writes (config::loadString). Any text:
// no crash, leak, undefined behaviour or exception out of the API; a rejection is
// InvalidArgument naming the source; an accepted config writes (toYaml) as YAML that
// reads back to an equal config (what validate() relies on).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr std::string_view kSource = "fuzz.yaml";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = tent::config::loadString(text, kSource);
  if (!parsed.ok()) {
    tent::fuzz::checkRejection(parsed.status(), kSource);
    return 0;
  }
  const std::string yaml = tent::config::toYaml(**parsed);
  auto again = tent::config::loadString(yaml, kSource);
  FUZZ_CHECK(again.ok(), "toYaml output does not parse: " + again.status().message() + "\n" + yaml);
  FUZZ_CHECK(**again == **parsed, "toYaml output reads back different:\n" + yaml);
  return 0;
}
