#include "tent/log.h"
#include "tent/log_sink.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <ctime>

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
    "common", "config", "topology", "lcore", "fabric", "engine", "direct", "bench", "metrics"};

char levelLetter(Level l) noexcept {
  static constexpr char kLetters[] = {'T', 'D', 'I', 'W', 'E', '-'};
  return kLetters[static_cast<size_t>(l)];
}

std::atomic<Sink> g_sink{nullptr};

thread_local int t_lcore = -1;
// Cached: gettid() is a syscall, a log line should not cost one. 0 = not asked yet.
thread_local pid_t t_tid = 0;

// A forked child starts with the forking thread's cache, which names the parent's thread.
void forgetTidInChild() {
  t_tid = 0;
}
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, forgetTidInChild);

pid_t threadId() noexcept {
  if (t_tid == 0) t_tid = gettid();
  return t_tid;
}

// "2026-12-01T10:11:12.345678Z [tent:engine] W tid=1234 lcore=2 "; returns its length.
int formatPrefix(char* out, size_t size, Component c, Level l) noexcept {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  gmtime_r(&now.tv_sec, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  const std::string_view name = componentName(c);
  int n = std::snprintf(out, size, "%s.%06ldZ [tent:%.*s] %c tid=%d ", date, now.tv_nsec / 1000,
                        static_cast<int>(name.size()), name.data(), levelLetter(l),
                        static_cast<int>(threadId()));
  if (t_lcore >= 0 && n > 0 && static_cast<size_t>(n) < size)
    n += std::snprintf(out + n, size - static_cast<size_t>(n), "lcore=%d ", t_lcore);
  return n;
}

}  // namespace

void setThreadLcore(int lcore) noexcept {
  t_lcore = lcore;
}

int threadLcore() noexcept {
  return t_lcore;
}

void setLevel(Component c, Level l) noexcept {
  g_levels[static_cast<size_t>(c)].store(l, std::memory_order_relaxed);
}

void setAllLevels(Level l) noexcept {
  for (auto& lvl : g_levels) lvl.store(l, std::memory_order_relaxed);
}

Level level(Component c) noexcept {
  return g_levels[static_cast<size_t>(c)].load(std::memory_order_relaxed);
}

bool enabled(Component c, Level l) noexcept {
  return l >= level(c) && l != Level::kOff;
}

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

std::string_view componentName(Component c) noexcept {
  return kNames[static_cast<size_t>(c)];
}

bool parseComponent(std::string_view text, Component* out) noexcept {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (text == kNames[i]) {
      *out = static_cast<Component>(i);
      return true;
    }
  }
  return false;
}

void setSink(Sink sink) noexcept {
  g_sink.store(sink, std::memory_order_release);
}

void write(Component c, Level l, const char* fmt, ...) noexcept {
  char line[1152];
  if (const Sink sink = g_sink.load(std::memory_order_acquire)) {
    va_list ap;
    va_start(ap, fmt);
    const int m = std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    sink(c, l, line, std::min(static_cast<size_t>(std::max(m, 0)), sizeof(line) - 1));
    return;
  }
  constexpr size_t kRoom = sizeof(line) - 1;  // the newline always fits
  size_t n = static_cast<size_t>(std::max(formatPrefix(line, kRoom, c, l), 0));
  n = std::min(n, kRoom - 1);
  va_list ap;
  va_start(ap, fmt);
  const int m = std::vsnprintf(line + n, kRoom - n, fmt, ap);
  va_end(ap);
  n = std::min(n + static_cast<size_t>(std::max(m, 0)), kRoom - 1);
  line[n++] = '\n';
  std::fwrite(line, 1, n, stderr);
}

}  // namespace tent::log
