#include "tent/log.h"

#include <array>
#include <atomic>
#include <cstdio>

namespace tent::log {
namespace {

constexpr size_t kComponents = static_cast<size_t>(Component::kCount);
// Initialised in place: std::array<std::atomic<...>> cannot be copied or moved.
struct Levels {
  std::array<std::atomic<Level>, kComponents> a;
  Levels() {
    for (auto& l : a) l.store(Level::kWarn, std::memory_order_relaxed);
  }
  std::atomic<Level>& operator[](size_t i) { return a[i]; }
  auto begin() { return a.begin(); }
  auto end() { return a.end(); }
};
Levels g_levels;

constexpr std::array<std::string_view, kComponents> kNames = {
    "common", "config", "topology", "lcore", "fabric", "engine", "direct", "bench"};

char levelLetter(Level l) noexcept {
  static constexpr char kLetters[] = {'T', 'D', 'I', 'W', 'E', '-'};
  return kLetters[static_cast<size_t>(l)];
}

}  // namespace

void setLevel(Component c, Level l) noexcept {
  g_levels[static_cast<size_t>(c)].store(l, std::memory_order_relaxed);
}

void setAllLevels(Level l) noexcept {
  for (auto& lvl : g_levels) lvl.store(l, std::memory_order_relaxed);
}

Level level(Component c) noexcept {
  return g_levels[static_cast<size_t>(c)].load(std::memory_order_relaxed);
}

bool enabled(Component c, Level l) noexcept { return l >= level(c) && l != Level::kOff; }

bool parseLevel(std::string_view text, Level* out) noexcept {
  static constexpr std::array<std::string_view, 6> kLevelNames = {"trace", "debug", "info",
                                                                   "warn",  "error", "off"};
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (text == kLevelNames[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

std::string_view componentName(Component c) noexcept { return kNames[static_cast<size_t>(c)]; }

bool parseComponent(std::string_view text, Component* out) noexcept {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (text == kNames[i]) {
      *out = static_cast<Component>(i);
      return true;
    }
  }
  return false;
}

void write(Component c, Level l, const char* fmt, ...) noexcept {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[tent:%.*s] %c %s\n", static_cast<int>(componentName(c).size()),
               componentName(c).data(), levelLetter(l), line);
}

}  // namespace tent::log
