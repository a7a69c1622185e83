// TransferEngine factory functions and the small public helpers.
#include "api/engine_impl.h"

namespace tent {

namespace {
Result<std::unique_ptr<TransferEngine>> build(
    Result<std::shared_ptr<const config::Config>> config) {
  if (!config.ok()) return config.status();
  auto engine = TransferEngineImpl::create(std::move(config).value());
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<TransferEngine>(std::move(engine).value());
}
}  // namespace

Result<std::unique_ptr<TransferEngine>> TransferEngine::create(const std::string& config_path) {
  return build(config_path.empty() ? config::loadFromEnvironment() : config::loadFile(config_path));
}

Result<std::unique_ptr<TransferEngine>> TransferEngine::createFromYaml(std::string_view yaml) {
  return build(config::loadString(yaml, "<yaml>"));
}

namespace {
constexpr std::string_view kIntentNames[] = {"unspec",    "foreground_get", "background_prefetch",
                                             "migration", "checkpoint",     "weight_loading"};
}

std::string_view toString(IntentType t) noexcept {
  auto i = static_cast<size_t>(t);
  return i < std::size(kIntentNames) ? kIntentNames[i] : "unknown";
}

Result<IntentType> parseIntentType(std::string_view text) {
  for (size_t i = 0; i < std::size(kIntentNames); ++i)
    if (text == kIntentNames[i]) return static_cast<IntentType>(i);
  return Status::InvalidArgument("unknown intent type '" + std::string(text) +
                                 "' (unspec, foreground_get, background_prefetch, migration, "
                                 "checkpoint, weight_loading)");
}

std::string_view toString(MemoryAccess a) noexcept {
  switch (a) {
    case MemoryAccess::kRemoteRead:
      return "r";
    case MemoryAccess::kRemoteWrite:
      return "w";
    case MemoryAccess::kRemoteReadWrite:
      return "rw";
  }
  return "unknown";
}

Result<MemoryAccess> parseMemoryAccess(std::string_view text) {
  if (text == "r" || text == "read") return MemoryAccess::kRemoteRead;
  if (text == "w" || text == "write") return MemoryAccess::kRemoteWrite;
  if (text == "rw" || text == "readwrite") return MemoryAccess::kRemoteReadWrite;
  return Status::InvalidArgument("unknown memory access '" + std::string(text) +
                                 "' (r, w, rw; or read, write, readwrite)");
}

}  // namespace tent
