// Logging with per-component levels. The datapath uses TENT_DLOG, which compiles
// out unless TENT_DATAPATH_DEBUG is defined, so hot loops never format or lock.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string_view>

namespace tent::log {

enum class Level : uint8_t { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

enum class Component : uint8_t {
  kCommon = 0,
  kConfig,
  kTopology,
  kLcore,
  kFabric,
  kEngine,
  kDirect,
  kBench,
  kMetrics,
  kCount,
};

void setLevel(Component c, Level l) noexcept;
void setAllLevels(Level l) noexcept;
Level level(Component c) noexcept;
bool enabled(Component c, Level l) noexcept;
// Parses "trace|debug|info|warn|error|off"; returns false when unknown.
bool parseLevel(std::string_view text, Level* out) noexcept;
std::string_view componentName(Component c) noexcept;
// Looks a component up by its name ("engine", "fabric", ...); false when unknown.
bool parseComponent(std::string_view text, Component* out) noexcept;

// The lcore this thread runs, as EngineStats::lcores[].lcore numbers it; -1 (the default)
// for threads that are not lcores. The lcore runtime sets it on its threads, so common/
// needs no DPDK. Thread-local: a plain store and load.
void setThreadLcore(int lcore) noexcept;
int threadLcore() noexcept;

// Writes one line to stderr with a single write, so lines of threads do not interleave:
//   "2026-12-01T10:11:12.345678Z [tent:engine] W tid=1234 lcore=2 message"
// UTC wall-clock time to the microsecond, component, level letter (T D I W E), the kernel
// thread id, and " lcore=N" only on lcore threads. Messages are cut at about 1000 bytes.
void write(Component c, Level l, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

}  // namespace tent::log

#define TENT_LOG(comp, lvl, ...)                                                              \
  do {                                                                                        \
    if (::tent::log::enabled(::tent::log::Component::comp, ::tent::log::Level::lvl))          \
      ::tent::log::write(::tent::log::Component::comp, ::tent::log::Level::lvl, __VA_ARGS__); \
  } while (0)

#define TENT_INFO(comp, ...) TENT_LOG(comp, kInfo, __VA_ARGS__)
#define TENT_WARN(comp, ...) TENT_LOG(comp, kWarn, __VA_ARGS__)
#define TENT_ERROR(comp, ...) TENT_LOG(comp, kError, __VA_ARGS__)
#define TENT_DEBUG(comp, ...) TENT_LOG(comp, kDebug, __VA_ARGS__)

#ifdef TENT_DATAPATH_DEBUG
#define TENT_DLOG(comp, ...) TENT_LOG(comp, kDebug, __VA_ARGS__)
#else
#define TENT_DLOG(comp, ...) \
  do {                       \
  } while (0)
#endif
