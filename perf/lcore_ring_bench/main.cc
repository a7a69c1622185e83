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

#include <gflags/gflags.h>

#include "base/cli/cli_flags.h"
#include "bench_pollers.h"
#include "fan_in.h"
#include "lcore/runtime.h"

DEFINE_uint64(iterations, 100000,
              "ping-pong round trips; the throughput runs move 10 x N objects each");
DEFINE_uint32(burst, 32, "burst size of the burst throughput run, 1..256");
DEFINE_string(cpus, "",
              "CPUs of the two lcores 'a,b', -1 = unpinned (empty: the first two CPUs this "
              "process may use, or unpinned with only one)");
DEFINE_uint32(producers, 4, "application threads of the fan-in run, 1..64");
DEFINE_string(producer_sync, "slot",
              "the fan-in ring: slot (the pollers' SlotRing), rts (tent's RawRing default) or "
              "classic (DPDK's default MP mode, for comparison)");
DEFINE_string(ring_sync, "slot",
              "the ping-pong and throughput rings: slot, rts, classic or single (rte_ring "
              "single producer; each of these rings has one producer)");

namespace tent::bench {
namespace {

constexpr uint32_t kRingSize = 4096;
constexpr uint64_t kObjectsPerIteration = 10;  // throughput objects per --iterations
constexpr auto kPhaseTimeout = std::chrono::seconds(120);

constexpr unsigned kFanInLimitS = 30;

struct Options {
  uint64_t iterations = 100000;
  unsigned burst = 32;
  int cpus[2] = {-1, -1};
  unsigned producers = 4;
  RingKind producer_kind = RingKind::kSlot;  // the fan-in ring
  RingKind ring_kind = RingKind::kSlot;      // ping-pong and throughput rings
};

constexpr const char* kUsage =
    "usage: lcore_ring_bench [--iterations=N] [--burst=N] [--cpus=a,b] [--producers=N]\n"
    "                        [--producer_sync=slot|rts|classic]\n"
    "                        [--ring_sync=slot|rts|classic|single]";

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

// The flags into `o`; false (with one line on stderr naming the flag) on a bad value.
bool readFlags(Options* o) {
  defaultCpus(o);
  auto bad = [](const char* flag, const std::string& value) {
    std::fprintf(stderr, "lcore_ring_bench: bad value '%s' for --%s (--help)\n", value.c_str(),
                 flag);
    return false;
  };
  if (FLAGS_iterations < 1 || FLAGS_iterations > (uint64_t{1} << 40))
    return bad("iterations", std::to_string(FLAGS_iterations));
  if (FLAGS_burst < 1 || FLAGS_burst > ProducerPoller::kMaxBurst)
    return bad("burst", std::to_string(FLAGS_burst));
  if (FLAGS_producers < 1 || FLAGS_producers > 64)
    return bad("producers", std::to_string(FLAGS_producers));
  if (!parseRingKind(FLAGS_producer_sync, &o->producer_kind) ||
      o->producer_kind == RingKind::kSingle)  // several producer threads
    return bad("producer_sync", FLAGS_producer_sync);
  if (!parseRingKind(FLAGS_ring_sync, &o->ring_kind)) return bad("ring_sync", FLAGS_ring_sync);
  o->iterations = FLAGS_iterations;
  o->burst = FLAGS_burst;
  o->producers = FLAGS_producers;
  if (!FLAGS_cpus.empty()) {
    const std::string& v = FLAGS_cpus;
    const size_t comma = v.find(',');
    if (comma == std::string::npos || !parseCpu(v.substr(0, comma), &o->cpus[0]) ||
        !parseCpu(v.substr(comma + 1), &o->cpus[1]))
      return bad("cpus", v);
  }
  return true;
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

// The ping-pong and throughput rings (one producer each, so `single` is allowed there).
Result<std::unique_ptr<BenchRing>> makeRing(const char* name, RingKind kind) {
  return makeBenchRing(name, kRingSize, kind);
}

bool measureLatency(lcore::Runtime& rt, const Options& o, double tsc_hz, Latency* out) {
  auto ping = makeRing("bench-ping", o.ring_kind);
  auto pong = makeRing("bench-pong", o.ring_kind);
  if (!ping.ok() || !pong.ok()) return false;
  const uint64_t warmup = std::min<uint64_t>(o.iterations / 10, 10000);
  PingPoller pinger(**ping, **pong, o.iterations, warmup);
  PongPoller ponger(**ping, **pong);
  if (!runPhase(rt, pinger, ponger, pinger, "ping-pong")) return false;
  *out = oneWayLatency(pinger.rttCycles(), tsc_hz);
  return true;
}

bool measureThroughput(lcore::Runtime& rt, const Options& o, unsigned burst, double tsc_hz,
                       double* ops_per_s) {
  const uint64_t objects = o.iterations * kObjectsPerIteration;
  auto ring = makeRing("bench-stream", o.ring_kind);
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

// The 1-minute load average: the figures mean little on a machine busy with other work.
double loadAverage() {
  double load[1] = {-1};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

struct Figures {
  Latency latency;
  double single = 0;
  double burst = 0;
  FanInResult fan_in;
};

void printTable(const Options& o, double tsc_hz, const Figures& f, double load) {
  std::printf(
      "lcore_ring_bench: lcores on CPU %s and %s, TSC %.3f GHz, ring %s (slot: SlotRing; "
      "otherwise rte_ring with those producers), single consumer, %u slots, load average "
      "%.2f\n",
      cpuText(o.cpus[0]).c_str(), cpuText(o.cpus[1]).c_str(), tsc_hz / 1e9,
      ringKindName(o.ring_kind), kRingSize, load);
  auto row = [](const std::string& name, double value, const char* fmt) {
    std::printf("%-52s ", name.c_str());
    std::printf(fmt, value);
    std::printf("\n");
  };
  std::printf("%-52s %14s\n", "metric", "value");
  row("hand-off one-way p50 (ns)", f.latency.p50_ns, "%14.1f");
  row("hand-off one-way p99 (ns)", f.latency.p99_ns, "%14.1f");
  row("hand-off one-way p999 (ns)", f.latency.p999_ns, "%14.1f");
  row("hand-off one-way mean (ns)", f.latency.mean_ns, "%14.1f");
  row("throughput single enqueue/dequeue (obj/s)", f.single, "%14.3e");
  row("throughput burst " + std::to_string(o.burst) + " (obj/s)", f.burst, "%14.3e");
  const std::string fan = "fan-in " + std::to_string(o.producers) + " threads, " +
                          ringKindName(o.producer_kind) + ", bulk 8";
  row(fan + " (obj/s)", f.fan_in.obj_per_s, "%14.3e");
  row(fan + " enqueue p99 (ns)", f.fan_in.enqueue_p99_ns, "%14.1f");
  row(fan + " enqueue p999 (ns)", f.fan_in.enqueue_p999_ns, "%14.1f");
  row(fan + " enqueue max (ns)", f.fan_in.enqueue_max_ns, "%14.1f");
  std::printf(
      "(%llu round trips; %llu objects per throughput and fan-in run; every object "
      "checked)\n",
      static_cast<unsigned long long>(o.iterations),
      static_cast<unsigned long long>(o.iterations * kObjectsPerIteration));
}

void printJson(const Options& o, double tsc_hz, const Figures& f, double load) {
  const FanInResult& fi = f.fan_in;
  nlohmann::json j = {
      {"bench", "lcore_ring_bench"},
      {"cpus", {o.cpus[0], o.cpus[1]}},
      {"tsc_hz", tsc_hz},
      {"load_average_1m", load},
      {"ring_slots", kRingSize},
      {"ring", ringKindName(o.ring_kind)},
      {"round_trips", o.iterations},
      {"objects", o.iterations * kObjectsPerIteration},
      {"handoff_one_way_ns",
       {{"p50", f.latency.p50_ns},
        {"p99", f.latency.p99_ns},
        {"p999", f.latency.p999_ns},
        {"mean", f.latency.mean_ns}}},
      {"throughput_obj_per_s", {{"single", f.single}, {"burst", f.burst}, {"burst_size", o.burst}}},
      {"fan_in",
       {{"producers", o.producers},
        {"ring", ringKindName(o.producer_kind)},
        {"bulk", 8},
        {"finished", fi.finished},
        {"obj_per_s", fi.obj_per_s},
        {"enqueue_ns",
         {{"p50", fi.enqueue_p50_ns},
          {"p99", fi.enqueue_p99_ns},
          {"p999", fi.enqueue_p999_ns},
          {"max", fi.enqueue_max_ns}}}}},
  };
  std::printf("%s\n", j.dump().c_str());
}

int run(int argc, char** argv) {
  if (int rc = cli::parseFlags(&argc, &argv, kUsage); rc != cli::kContinue) return rc;
  if (argc > 1) {
    std::fprintf(stderr, "lcore_ring_bench: unexpected argument '%s' (--help)\n", argv[1]);
    return 2;
  }
  Options o;
  if (!readFlags(&o)) return 2;
  auto rt = lcore::Runtime::acquire(benchConfig(o));
  if (!rt.ok()) {
    std::fprintf(stderr, "lcore_ring_bench: %s\n", rt.status().toString().c_str());
    return 1;
  }
  const double tsc_hz = static_cast<double>(rte_get_tsc_hz());
  const uint64_t objects = o.iterations * kObjectsPerIteration;
  Figures f;
  if (!measureLatency(**rt, o, tsc_hz, &f.latency) ||
      !measureThroughput(**rt, o, 1, tsc_hz, &f.single) ||
      !measureThroughput(**rt, o, o.burst, tsc_hz, &f.burst)) {
    return 1;
  }
  f.fan_in = runFanIn(**rt, 1, o.producers, objects, o.producer_kind, tsc_hz, kFanInLimitS);
  if (!f.fan_in.finished) {
    // Producers are stuck (classic mode convoy): report and end the process without joining.
    std::printf("fan-in with %u %s producers did not finish within %u s\n", o.producers,
                ringKindName(o.producer_kind), kFanInLimitS);
    std::fflush(stdout);
    std::_Exit(1);
  }
  if (f.fan_in.errors != 0) {
    std::fprintf(stderr, "lcore_ring_bench: fan-in: %llu order errors\n",
                 static_cast<unsigned long long>(f.fan_in.errors));
    return 1;
  }
  const double load = loadAverage();
  printTable(o, tsc_hz, f, load);
  printJson(o, tsc_hz, f, load);
  return 0;
}

}  // namespace
}  // namespace tent::bench

int main(int argc, char** argv) {
  return tent::bench::run(argc, argv);
}
