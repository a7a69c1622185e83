// lcore_ring_bench: cross-lcore hand-off latency (ping-pong through two rings,
// one way = RTT / 2) and ring throughput (single and burst enqueue/dequeue),
// between two EAL lcores of the tent lcore runtime. Prints a table and one JSON line.
#include <rte_cycles.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_pollers.h"
#include "lcore/runtime.h"

namespace tent::bench {
namespace {

constexpr uint32_t kRingSize = 4096;
constexpr uint64_t kObjectsPerIteration = 20;  // throughput objects per --iterations
constexpr auto kPhaseTimeout = std::chrono::seconds(120);

struct Options {
  uint64_t iterations = 100000;
  unsigned burst = 32;
  int cpus[2] = {-1, -1};
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: lcore_ring_bench [--iterations=N] [--burst=N] [--cpus=a,b] [--help]\n"
               "  --iterations=N  ping-pong round trips (default 100000); the throughput runs\n"
               "                  move %llu x N objects each\n"
               "  --burst=N       burst size of the burst throughput run, 1..%u (default 32)\n"
               "  --cpus=a,b      CPUs of the two lcores, -1 = unpinned (default: the first two\n"
               "                  CPUs this process may use, or unpinned with only one)\n",
               static_cast<unsigned long long>(kObjectsPerIteration), ProducerPoller::kMaxBurst);
}

bool parseUnsigned(const std::string& text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || v == 0 || v > max) return false;
  *out = v;
  return true;
}

bool parseCpu(const std::string& text, int* out) {
  if (text == "-1") {
    *out = -1;
    return true;
  }
  uint64_t v = 0;
  if (text == "0") {
    *out = 0;
    return true;
  }
  if (!parseUnsigned(text, CPU_SETSIZE - 1, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

void defaultCpus(Options* o) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2) return;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (CPU_ISSET(cpu, &set)) o->cpus[found++] = cpu;
  }
}

// Returns 0 to go on, 1 after --help, 2 on a bad flag (usage printed).
int parseOptions(int argc, char** argv, Options* o) {
  defaultCpus(o);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (flag == "--help" || flag == "-h") {
      usage(stdout);
      return 1;
    }
    if (eq == std::string::npos && i + 1 < argc) value = argv[++i];
    uint64_t v = 0;
    bool ok = false;
    if (flag == "--iterations") {
      ok = parseUnsigned(value, uint64_t{1} << 40, &v);
      o->iterations = v;
    } else if (flag == "--burst") {
      ok = parseUnsigned(value, ProducerPoller::kMaxBurst, &v);
      o->burst = static_cast<unsigned>(v);
    } else if (flag == "--cpus") {
      const size_t comma = value.find(',');
      ok = comma != std::string::npos && parseCpu(value.substr(0, comma), &o->cpus[0]) &&
           parseCpu(value.substr(comma + 1), &o->cpus[1]);
    } else {
      std::fprintf(stderr, "lcore_ring_bench: unknown flag '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "lcore_ring_bench: bad value '%s' for %s\n", value.c_str(),
                   flag.c_str());
      usage(stderr);
      return 2;
    }
  }
  return 0;
}

config::Config benchConfig(const Options& o) {
  config::Config c;
  c.eal.mode = config::LcoreMode::kEal;
  c.eal.file_prefix = "tent-lcore-ring-bench-" + std::to_string(getpid());
  // Pure spinning: the figures are the hand-off itself, not an idle wake-up.
  config::IdlePolicy spin;
  spin.spin_polls = UINT32_MAX;
  for (int cpu : o.cpus) c.lcores.push_back(config::LcoreSpec{cpu, {}, spin});
  c.source = "lcore_ring_bench";
  return c;
}

// Attaches `a` to lcore 0 and `b` to lcore 1, waits until `until` is done, detaches.
bool runPhase(lcore::Runtime& rt, BenchPoller& a, BenchPoller& b, const BenchPoller& until,
              const char* what) {
  if (!rt.attach(1, &b).ok() || !rt.attach(0, &a).ok()) {
    std::fprintf(stderr, "lcore_ring_bench: %s: attach failed\n", what);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + kPhaseTimeout;
  // The main thread shares the CPUs with the lcores: poll the flag rarely.
  while (!until.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool finished = until.done();
  (void)rt.detach(0, &a);
  (void)rt.detach(1, &b);
  if (!finished) std::fprintf(stderr, "lcore_ring_bench: %s did not finish in time\n", what);
  if (a.errors() + b.errors() != 0) {
    std::fprintf(stderr, "lcore_ring_bench: %s: %llu sequence errors\n", what,
                 static_cast<unsigned long long>(a.errors() + b.errors()));
    return false;
  }
  return finished;
}

struct Latency {
  double p50_ns = 0, p99_ns = 0, p999_ns = 0, mean_ns = 0;
};

Latency oneWayLatency(std::vector<uint64_t>& rtt, double tsc_hz) {
  Latency l;
  if (rtt.empty()) return l;
  std::sort(rtt.begin(), rtt.end());
  const double to_one_way_ns = 1e9 / tsc_hz / 2;
  auto at = [&](double q) {
    const size_t i = std::min(rtt.size() - 1, static_cast<size_t>(q * rtt.size()));
    return rtt[i] * to_one_way_ns;
  };
  l.p50_ns = at(0.50);
  l.p99_ns = at(0.99);
  l.p999_ns = at(0.999);
  double sum = 0;
  for (uint64_t c : rtt) sum += c;
  l.mean_ns = sum / rtt.size() * to_one_way_ns;
  return l;
}

Result<std::unique_ptr<lcore::RawRing>> makeRing(const char* name) {
  return lcore::RawRing::create(name, kRingSize, /*single_consumer=*/true);
}

bool measureLatency(lcore::Runtime& rt, const Options& o, double tsc_hz, Latency* out) {
  auto ping = makeRing("bench-ping");
  auto pong = makeRing("bench-pong");
  if (!ping.ok() || !pong.ok()) return false;
  const uint64_t warmup = std::min<uint64_t>(o.iterations / 10, 10000);
  PingPoller pinger(**ping, **pong, o.iterations, warmup);
  PongPoller ponger(**ping, **pong);
  if (!runPhase(rt, pinger, ponger, pinger, "ping-pong")) return false;
  *out = oneWayLatency(pinger.rttCycles(), tsc_hz);
  return true;
}

bool measureThroughput(lcore::Runtime& rt, uint64_t objects, unsigned burst, double tsc_hz,
                       double* ops_per_s) {
  auto ring = makeRing("bench-stream");
  if (!ring.ok()) return false;
  ProducerPoller producer(**ring, objects, burst);
  ConsumerPoller consumer(**ring, objects, burst);
  const std::string what = "throughput burst " + std::to_string(burst);
  if (!runPhase(rt, producer, consumer, consumer, what.c_str())) return false;
  const uint64_t cycles = consumer.finishedAt() - producer.startedAt();
  *ops_per_s = cycles == 0 ? 0 : objects * tsc_hz / cycles;
  return true;
}

std::string cpuText(int cpu) {
  return cpu < 0 ? "unpinned" : std::to_string(cpu);
}

void report(const Options& o, double tsc_hz, const Latency& l, double single, double burst) {
  const uint64_t objects = o.iterations * kObjectsPerIteration;
  std::printf(
      "lcore_ring_bench: lcores on CPU %s and %s, TSC %.3f GHz, rte_ring MP/SC (%u slots)\n",
      cpuText(o.cpus[0]).c_str(), cpuText(o.cpus[1]).c_str(), tsc_hz / 1e9, kRingSize);
  std::printf("%-44s %14s\n", "metric", "value");
  std::printf("%-44s %14.1f\n", "hand-off one-way p50 (ns)", l.p50_ns);
  std::printf("%-44s %14.1f\n", "hand-off one-way p99 (ns)", l.p99_ns);
  std::printf("%-44s %14.1f\n", "hand-off one-way p999 (ns)", l.p999_ns);
  std::printf("%-44s %14.1f\n", "hand-off one-way mean (ns)", l.mean_ns);
  std::printf("%-44s %14.3e\n", "throughput single enqueue/dequeue (obj/s)", single);
  const std::string burst_row = "throughput burst " + std::to_string(o.burst) + " (obj/s)";
  std::printf("%-44s %14.3e\n", burst_row.c_str(), burst);
  std::printf("(%llu round trips; %llu objects per throughput run; every object checked)\n",
              static_cast<unsigned long long>(o.iterations),
              static_cast<unsigned long long>(objects));
  nlohmann::json j = {
      {"bench", "lcore_ring_bench"},
      {"cpus", {o.cpus[0], o.cpus[1]}},
      {"tsc_hz", tsc_hz},
      {"ring_slots", kRingSize},
      {"round_trips", o.iterations},
      {"objects", objects},
      {"handoff_one_way_ns",
       {{"p50", l.p50_ns}, {"p99", l.p99_ns}, {"p999", l.p999_ns}, {"mean", l.mean_ns}}},
      {"throughput_obj_per_s", {{"single", single}, {"burst", burst}, {"burst_size", o.burst}}},
  };
  std::printf("%s\n", j.dump().c_str());
}

int run(int argc, char** argv) {
  Options o;
  const int parsed = parseOptions(argc, argv, &o);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  auto rt = lcore::Runtime::acquire(benchConfig(o));
  if (!rt.ok()) {
    std::fprintf(stderr, "lcore_ring_bench: %s\n", rt.status().toString().c_str());
    return 1;
  }
  const double tsc_hz = static_cast<double>(rte_get_tsc_hz());
  const uint64_t objects = o.iterations * kObjectsPerIteration;
  Latency latency;
  double single = 0, burst = 0;
  if (!measureLatency(**rt, o, tsc_hz, &latency) ||
      !measureThroughput(**rt, objects, 1, tsc_hz, &single) ||
      !measureThroughput(**rt, objects, o.burst, tsc_hz, &burst)) {
    return 1;
  }
  report(o, tsc_hz, latency, single, burst);
  return 0;
}

}  // namespace
}  // namespace tent::bench

int main(int argc, char** argv) {
  return tent::bench::run(argc, argv);
}
