// TENT_LOG_LEVEL: the environment's word on log levels, over the config file's `log`
// section. applyLogConfig (config.h) applies it; docs/config.md, "log".
#pragma once

#include <string_view>

#include "config/config.h"

namespace tent::config {

inline constexpr const char* kLogLevelEnv = "TENT_LOG_LEVEL";

// TENT_LOG_LEVEL is a level ("debug"), per-component levels ("engine=debug,direct=trace"),
// or both ("warn,engine=info"). A bare level replaces log.level and drops the file's
// log.components (it means every component); a component entry replaces or adds
// log.components[c]. Errors name TENT_LOG_LEVEL, the bad word and the allowed values;
// on an error `log` is unchanged.
Status overlayLogLevelEnv(std::string_view text, LogConfig* log);

}  // namespace tent::config
