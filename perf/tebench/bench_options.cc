#include "perf/tebench/bench_options.h"

#include "base/byte_size.h"
#include "perf/tebench/bench_limits.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

namespace tent::bench {
namespace {

using Setter = std::function<Status(BenchOptions&, std::string_view)>;

struct FlagSpec {
  std::string name;
  bool is_bool;
  std::string default_text;
  std::string help;
  Setter set;
};

// 86400, 8.64e+10 -> as a range bound in messages.
std::string boundText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status badValue(std::string_view flag, std::string_view value, std::string_view expected) {
  return Status::InvalidArgument("--" + std::string(flag) + ": expected " + std::string(expected) +
                                 ", got '" + std::string(value) + "'");
}

Result<uint64_t> parseUnsigned(std::string_view text) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Status::InvalidArgument("not an unsigned integer");
  }
  return v;
}

Result<double> parseDouble(std::string_view text) {
  std::string s(text);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {  // std::stod throws on junk and overflow; keep exceptions inside
    return Status::InvalidArgument("not a number");
  }
  if (used != s.size() || !std::isfinite(v)) return Status::InvalidArgument("not a number");
  return v;
}

Result<bool> parseBool(std::string_view text) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  return Status::InvalidArgument("not a boolean");
}

Setter stringFlag(std::string BenchOptions::*field) {
  return [field](BenchOptions& o, std::string_view v) {
    o.*field = std::string(v);
    return Status::OK();
  };
}

Setter sizeFlag(std::string name, uint64_t BenchOptions::*field, uint64_t hi) {
  return [name, field, hi](BenchOptions& o, std::string_view v) -> Status {
    auto parsed = parseSize(v);
    if (!parsed.ok() || *parsed == 0 || *parsed > hi) {
      return badValue(name, v,
                      "a size in [1, " + std::to_string(hi) + "] (" +
                          std::string(kByteSizeRule) + ", e.g. 4096, 64k, 4M, 1GiB)");
    }
    o.*field = *parsed;
    return Status::OK();
  };
}

Setter countFlag(std::string name, uint32_t BenchOptions::*field, uint32_t lo, uint32_t hi) {
  return [name, field, lo, hi](BenchOptions& o, std::string_view v) -> Status {
    auto parsed = parseUnsigned(v);
    if (!parsed.ok() || *parsed < lo || *parsed > hi) {
      return badValue(name, v,
                      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    o.*field = static_cast<uint32_t>(*parsed);
    return Status::OK();
  };
}

Setter microsFlag(std::string name, uint64_t BenchOptions::*field) {
  return [name, field](BenchOptions& o, std::string_view v) -> Status {
    auto parsed = parseUnsigned(v);
    if (!parsed.ok() || *parsed > kMaxMicros) {
      return badValue(name, v,
                      "an integer in [0, " + std::to_string(kMaxMicros) + "] (microseconds)");
    }
    o.*field = *parsed;
    return Status::OK();
  };
}

Setter secondsFlag(std::string name, double BenchOptions::*field, bool allow_zero) {
  return [name, field, allow_zero](BenchOptions& o, std::string_view v) -> Status {
    auto parsed = parseDouble(v);
    if (!parsed.ok() || *parsed < 0 || (!allow_zero && *parsed == 0) || *parsed > kMaxSeconds) {
      return badValue(name, v,
                      std::string("seconds in ") + (allow_zero ? "[0, " : "(0, ") +
                          boundText(kMaxSeconds) + "]");
    }
    o.*field = *parsed;
    return Status::OK();
  };
}

Setter boolFlag(std::string name, bool BenchOptions::*field) {
  return [name, field](BenchOptions& o, std::string_view v) -> Status {
    auto parsed = parseBool(v);
    if (!parsed.ok()) return badValue(name, v, "true or false");
    o.*field = *parsed;
    return Status::OK();
  };
}

Status setOpType(BenchOptions& o, std::string_view v) {
  if (v == "read") {
    o.op_type = OpType::kRead;
  } else if (v == "write") {
    o.op_type = OpType::kWrite;
  } else if (v == "mix") {
    o.op_type = OpType::kMix;
  } else {
    return badValue("op_type", v, "read, write or mix");
  }
  return Status::OK();
}

Status setPollMode(BenchOptions& o, std::string_view v) {
  auto mode = parsePollMode(v);
  if (!mode.ok()) return badValue("poll_mode", v, "spin, yield or wait");
  o.poll_mode = *mode;
  return Status::OK();
}

Status setTxResolution(BenchOptions& o, std::string_view v) {
  if (v == "ns") {
    o.tx_resolution = TxResolution::kNs;
  } else if (v == "us") {
    o.tx_resolution = TxResolution::kWholeUs;
  } else {
    return badValue("tx_resolution", v, "ns or us");
  }
  return Status::OK();
}

// Mooncake lowercases --tent_intent_type before looking it up.
Status setIntent(BenchOptions& o, std::string_view v) {
  std::string lower(v);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto parsed = parseIntentName(lower);
  if (!parsed.ok())
    return Status::InvalidArgument("--tent_intent_type: " + parsed.status().message());
  o.intent_type = *parsed;
  return Status::OK();
}

Status setLinkCapacity(BenchOptions& o, std::string_view v) {
  auto parsed = parseDouble(v);
  if (!parsed.ok() || *parsed < 0 || *parsed > kMaxLinkGBps)
    return badValue("qos_link_capacity_gbps", v, "GB/s in [0, " + boundText(kMaxLinkGBps) + "]");
  o.qos_link_capacity_gbps = *parsed;
  return Status::OK();
}

Status setClasses(BenchOptions& o, std::string_view v) {
  TENT_ASSIGN_OR_RETURN(std::string text, loadWorkloadText(std::string(v)));
  TENT_ASSIGN_OR_RETURN(o.classes, parseWorkloadClasses(text));
  return Status::OK();
}

const std::vector<FlagSpec>& flagSpecs() {
  using O = BenchOptions;
  static const std::vector<FlagSpec> specs = {
      {"backend", false, "tent", "transfer engine backend (only 'tent')", stringFlag(&O::backend)},
      {"xport_type", false, "rdma", "transport (only 'rdma')", stringFlag(&O::xport_type)},
      {"seg_type", false, "DRAM", "memory type of the buffers (only DRAM, any case)",
       stringFlag(&O::seg_type)},
      {"metadata_type", false, "p2p", "metadata service (only 'p2p', as Mooncake's default)",
       stringFlag(&O::metadata_type)},
      {"config", false, "", "engine YAML config (empty: TENT_CONFIG or the defaults)",
       stringFlag(&O::config_path)},
      {"target_seg_name", false, "",
       "host:port of the target (one; no comma-separated list); empty = run as the target",
       stringFlag(&O::target_seg_name)},
      {"total_buffer_size", false, "256M", "bytes allocated and registered on each side",
       sizeFlag("total_buffer_size", &O::total_buffer_size, kMaxBufferBytes)},
      {"op_type", false, "read", "read | write | mix (mix: WRITE then READ, both recorded)",
       setOpType},
      {"check_consistency", true, "false",
       "WRITE a fresh pattern, READ it back, verify every byte (implies mix)",
       boolFlag("check_consistency", &O::check_consistency)},
      {"notifi", true, "false",
       "notifications: the target reports completion -> receipt latency (p50/p99/p999) and "
       "rate; the initiator sends one after each batch (start sizes, one thread)",
       boolFlag("notifi", &O::notifi)},
      {"start_block_size", false, "4096", "first block size of the sweep",
       sizeFlag("start_block_size", &O::start_block_size, kMaxBlockBytes)},
      {"max_block_size", false, "64M", "last block size (doubling)",
       sizeFlag("max_block_size", &O::max_block_size, kMaxBlockBytes)},
      {"start_batch_size", false, "1", "first batch size of the sweep",
       countFlag("start_batch_size", &O::start_batch_size, 1, kMaxBatch)},
      {"max_batch_size", false, "1", "last batch size (doubling)",
       countFlag("max_batch_size", &O::max_batch_size, 1, kMaxBatch)},
      {"start_num_threads", false, "1", "first thread count of the sweep",
       countFlag("start_num_threads", &O::start_num_threads, 1, kMaxThreads)},
      {"max_num_threads", false, "1", "last thread count (doubling)",
       countFlag("max_num_threads", &O::max_num_threads, 1, kMaxThreads)},
      {"duration", false, "5", "measured seconds per case",
       secondsFlag("duration", &O::duration_s, false)},
      {"warmup", false, "1", "unmeasured seconds before the start barrier",
       secondsFlag("warmup", &O::warmup_s, true)},
      {"request_interval_us", false, "0",
       "each thread waits this many us before each transfer, as Mooncake's (0 = closed loop)",
       microsFlag("request_interval_us", &O::request_interval_us)},
      {"aggregate_interval_us", false, "0",
       "aggregate pacing: one transfer per interval across all threads (0 = none)",
       microsFlag("aggregate_interval_us", &O::aggregate_interval_us)},
      {"tent_intent_type", false, "unspec",
       "intent of every request (unspec, foreground_get, background_prefetch, migration, "
       "checkpoint, weight_loading)",
       setIntent},
      {"deadline_us", false, "0",
       "deadline_ns = submit time + this (0 = none); sweep: only --deadline_tight_threads carry it",
       microsFlag("deadline_us", &O::deadline_us)},
      {"deadline_tight_threads", false, "0",
       "sweep mode: threads [0, N) carry --deadline_us, the others none (Mooncake's rule)",
       countFlag("deadline_tight_threads", &O::deadline_tight_threads, 0, kMaxThreads)},
      {"tx_resolution", false, "ns",
       "ns | us: keep transfer durations in ns, or in whole us truncated as Mooncake's timer",
       setTxResolution},
      {"poll_mode", false, "spin",
       "spin | yield between getTransferStatus polls | wait (waitTransfer per task) (QoS: default "
       "of the classes)",
       setPollMode},
      {"transfer_timeout", false, "30", "seconds a transfer may stay pending before the run fails",
       secondsFlag("transfer_timeout", &O::transfer_timeout_s, false)},
      {"workload_classes_json", false, "",
       "QoS mode: JSON array of classes (inline, or @file); see docs/perf/tebench.md", setClasses},
      {"qos_link_capacity_gbps", false, "0", "link capacity in GB/s for total_utilization",
       setLinkCapacity},
      {"qos_output_jsonl", false, "", "append one JSON record per QoS run to this file",
       stringFlag(&O::qos_output_jsonl)},
      {"qos_latency_dump", false, "", "write per-class latency CDF points (JSON) to this file",
       stringFlag(&O::qos_latency_dump)},
      {"run_label", false, "", "label stored in the JSONL record (e.g. baseline, direct)",
       stringFlag(&O::run_label)},
  };
  return specs;
}

const FlagSpec* findFlag(std::string_view name) {
  for (const auto& spec : flagSpecs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string quoteArg(std::string_view arg) {
  if (arg.find_first_of(" \t\n'\"[]{}$*?;&|<>()\\") == std::string_view::npos) {
    return std::string(arg);
  }
  std::string out = "'";
  for (char ch : arg) out += (ch == '\'') ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Fills a missing bound from the given one, so "--start_num_threads=8" alone
// runs 8 threads instead of failing on the default max of 1.
template <typename T>
Status orderRange(const std::set<std::string>& given, const std::string& what, T* start, T* max) {
  if (*start <= *max) return Status::OK();
  if (!given.count("max_" + what)) {
    *max = *start;
  } else if (!given.count("start_" + what)) {
    *start = *max;
  } else {
    return Status::InvalidArgument("--start_" + what + " (" + std::to_string(*start) +
                                   ") is larger than --max_" + what + " (" + std::to_string(*max) +
                                   ")");
  }
  return Status::OK();
}

Status validateQos(const std::set<std::string>& given, BenchOptions* o) {
  if (o->isQos() && given.count("deadline_tight_threads")) {
    return Status::InvalidArgument(
        "--deadline_tight_threads applies to sweep mode; a workload class states its deadline_us");
  }
  if (!o->isQos()) {
    for (const char* flag : {"qos_output_jsonl", "qos_latency_dump", "qos_link_capacity_gbps"}) {
      if (given.count(flag)) {
        return Status::InvalidArgument(std::string("--") + flag +
                                       " needs --workload_classes_json (QoS mode)");
      }
    }
    return Status::OK();
  }
  const uint32_t sum = totalThreads(o->classes);
  for (const char* flag : {"start_num_threads", "max_num_threads"}) {
    uint32_t value =
        std::string(flag) == "start_num_threads" ? o->start_num_threads : o->max_num_threads;
    if (given.count(flag) && value != sum) {
      return Status::InvalidArgument(std::string("--") + flag + "=" + std::to_string(value) +
                                     " but the workload classes have " + std::to_string(sum) +
                                     " threads in total");
    }
  }
  o->start_num_threads = o->max_num_threads = sum;
  uint64_t needed = 0;
  for (auto& c : o->classes) {
    needed = saturatingSum(needed, saturatingProduct({c.threads, c.block_size, c.batch_size}));
    if (!c.intent_given) c.intent_type = o->intent_type;
    if (!c.deadline_given) c.deadline_us = o->deadline_us;
    if (!c.poll_given) c.poll_mode = o->poll_mode;
  }
  if (needed > o->total_buffer_size) {
    return Status::InvalidArgument("the workload classes need " + std::to_string(needed) +
                                   " bytes (threads x block_size x batch_size), more than "
                                   "--total_buffer_size=" +
                                   std::to_string(o->total_buffer_size));
  }
  return Status::OK();
}

// The flags that name what runs; tent has one backend, one transport, DRAM.
Status validateRole(BenchOptions* o) {
  if (o->backend != "tent") return badValue("backend", o->backend, "'tent'");
  // Mooncake's default is empty (the engine picks); tent's one transport is rdma.
  if (o->xport_type.empty()) o->xport_type = "rdma";
  if (o->xport_type != "rdma") {
    return badValue("xport_type", o->xport_type,
                    "'rdma' (the fabric provider, soft or verbs, comes from --config)");
  }
  if (o->seg_type == "dram") o->seg_type = "DRAM";  // Mooncake takes either case
  if (o->seg_type != "DRAM") return badValue("seg_type", o->seg_type, "DRAM");
  if (o->metadata_type != "p2p") return badValue("metadata_type", o->metadata_type, "'p2p'");
  if (o->target_seg_name.find(',') != std::string::npos) {
    return Status::InvalidArgument(
        "--target_seg_name: one target only (Mooncake's multi-target list is not supported)");
  }
  return Status::OK();
}

Status validate(const std::set<std::string>& given, BenchOptions* o) {
  TENT_RETURN_IF_ERROR(validateRole(o));
  TENT_RETURN_IF_ERROR(orderRange(given, "block_size", &o->start_block_size, &o->max_block_size));
  TENT_RETURN_IF_ERROR(orderRange(given, "batch_size", &o->start_batch_size, &o->max_batch_size));
  TENT_RETURN_IF_ERROR(
      orderRange(given, "num_threads", &o->start_num_threads, &o->max_num_threads));
  if (o->deadline_tight_threads > o->max_num_threads) {
    return Status::InvalidArgument(
        "--deadline_tight_threads (" + std::to_string(o->deadline_tight_threads) +
        ") is larger than --max_num_threads (" + std::to_string(o->max_num_threads) + ")");
  }
  if (o->check_consistency) o->op_type = OpType::kMix;
  return validateQos(given, o);
}

// Splits "--name=value" / "--name value" / "--bool". Advances *i past a
// separate value.
Status parseOne(int argc, const char* const* argv, int* i, std::set<std::string>* given,
                BenchOptions* o) {
  std::string_view arg = argv[*i];
  if (arg.substr(0, 2) != "--") {
    return Status::InvalidArgument("unexpected argument '" + std::string(arg) +
                                   "' (flags look like --name=value)");
  }
  arg.remove_prefix(2);
  if (arg == "help" || arg == "h") {
    o->help = true;
    return Status::OK();
  }
  const size_t eq = arg.find('=');
  std::string_view name = arg.substr(0, eq);
  const FlagSpec* spec = findFlag(name);
  if (spec == nullptr) return Status::InvalidArgument("unknown flag --" + std::string(name));
  std::string_view value;
  if (eq != std::string_view::npos) {
    value = arg.substr(eq + 1);
  } else if (spec->is_bool) {
    value = "true";
  } else if (*i + 1 < argc) {
    value = argv[++*i];
  } else {
    return Status::InvalidArgument("--" + std::string(name) + " needs a value");
  }
  given->insert(std::string(name));
  return spec->set(*o, value);
}

}  // namespace

std::string_view opTypeName(OpType op) noexcept {
  switch (op) {
    case OpType::kRead:
      return "read";
    case OpType::kWrite:
      return "write";
    case OpType::kMix:
      return "mix";
  }
  return "unknown";
}

// The one size rule of flags and config (base/byte_size.h).
Result<uint64_t> parseSize(std::string_view text) { return parseByteSize(text); }

Result<BenchOptions> parseBenchOptions(int argc, const char* const* argv) {
  BenchOptions o;
  std::set<std::string> given;
  for (int i = 0; i < argc; ++i) o.cmdline += (i ? " " : "") + quoteArg(argv[i]);
  for (int i = 1; i < argc; ++i) TENT_RETURN_IF_ERROR(parseOne(argc, argv, &i, &given, &o));
  if (o.help) return o;
  TENT_RETURN_IF_ERROR(validate(given, &o));
  return o;
}

std::vector<BenchFlag> benchFlags() {
  std::vector<BenchFlag> out;
  for (const FlagSpec& s : flagSpecs()) out.push_back({&s.name, s.is_bool, &s.default_text, &s.help});
  return out;
}

std::string benchUsage(const char* program) {
  std::ostringstream out;
  out << "usage:\n"
      << "  target:    " << program << " --backend=tent --xport_type=rdma --seg_type=DRAM"
      << " [--config=FILE] [--total_buffer_size=N]\n"
      << "  initiator: " << program << " --target_seg_name=HOST:PORT [flags]\n\nflags:\n";
  for (const auto& spec : flagSpecs()) {
    std::string left = "  --" + spec.name + (spec.is_bool ? "[=BOOL]" : "=V");
    if (left.size() < 30) left.resize(30, ' ');
    out << left << " " << spec.help;
    if (!spec.default_text.empty()) out << " [" << spec.default_text << "]";
    out << "\n";
  }
  out << "  --help                         this text\n";
  return out.str();
}

}  // namespace tent::bench
