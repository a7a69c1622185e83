#include "perf/tebench/workload_classes.h"

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "base/bounded_file.h"
#include "perf/tebench/bench_limits.h"

namespace tent::bench {
namespace {

using nlohmann::json;

// A class list is an array of flat objects (2 levels). nlohmann parses iteratively,
// but dump() and copies of its values recurse, so deep input would overflow the stack.
constexpr size_t kMaxDepth = 8;
// Values quoted back in messages are cut to this many characters (nlohmann's
// messages, which quote the offending token, to kMaxParserChars).
constexpr size_t kMaxShownChars = 60;
constexpr size_t kMaxParserChars = 200;
// A class list is a few KiB; a file this big is the wrong one.
constexpr uint64_t kMaxFileBytes = 1 << 20;

struct IntentEntry {
  std::string_view name;
  IntentType type;
};
constexpr IntentEntry kIntents[] = {
    {"unspec", IntentType::UNSPEC},
    {"intent_unspec", IntentType::UNSPEC},  // Mooncake's other spelling
    {"foreground_get", IntentType::FOREGROUND_GET},
    {"background_prefetch", IntentType::BACKGROUND_PREFETCH},
    {"migration", IntentType::MIGRATION},
    {"checkpoint", IntentType::CHECKPOINT},
    {"weight_loading", IntentType::WEIGHT_LOADING},
};

std::string allowedIntents() {
  std::string out;
  for (const auto& e : kIntents) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

// The 1-based byte (as nlohmann counts) where nesting first exceeds kMaxDepth, or 0.
// Brackets inside strings are skipped; on valid JSON this is the true depth.
size_t tooDeepAt(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return i + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return 0;
}

std::string cut(std::string text, size_t max_chars) {
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

// A value as messages quote it: its JSON, cut short.
std::string shown(const json& value) {
  return cut(value.dump(), kMaxShownChars);
}

// Prefix of every message about class `index`: `class 0 ("foreground")`.
std::string classLabel(size_t index, const json& object) {
  std::string label = "class " + std::to_string(index);
  auto it = object.find("name");
  if (it != object.end() && it->is_string())
    label += " (\"" + cut(it->get<std::string>(), kMaxShownChars) + "\")";
  return label;
}

Status fieldError(const std::string& where, std::string_view key, const std::string& what) {
  return Status::InvalidArgument("workload_classes_json: " + where + ": field '" +
                                 cut(std::string(key), kMaxShownChars) + "' " + what);
}

// Reads a non-negative integer in [lo, hi] (JSON integers only; 4096.0 is rejected
// so a typo'd float never silently truncates).
Result<uint64_t> readUnsigned(const json& value, const std::string& where, std::string_view key,
                              uint64_t lo, uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!value.is_number_integer()) {
    return fieldError(where, key, "must be an integer in " + range + ", got " + shown(value));
  }
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v >= lo && v <= hi) return v;
  } else {
    int64_t v = value.get<int64_t>();
    if (v >= 0 && static_cast<uint64_t>(v) >= lo && static_cast<uint64_t>(v) <= hi) {
      return static_cast<uint64_t>(v);
    }
  }
  return fieldError(where, key, "must be an integer in " + range + ", got " + shown(value));
}

Result<IntentType> readIntent(const json& value, const std::string& where) {
  if (value.is_string()) {
    auto parsed = parseIntentName(value.get<std::string>());
    if (parsed.ok()) return parsed;
    return fieldError(where, "intent_type",
                      "must be one of " + allowedIntents() + ", got " + shown(value));
  }
  if (value.is_number_integer()) {
    auto parsed = parseIntentName(value.dump());
    if (parsed.ok()) return parsed;
  }
  return fieldError(where, "intent_type",
                    "must be one of " + allowedIntents() + ", got " + shown(value));
}

Status applyField(const std::string& key, const json& value, const std::string& where,
                  WorkloadClass* c) {
  if (key == "name") {
    if (!value.is_string() || value.get<std::string>().empty()) {
      return fieldError(where, key, "must be a non-empty string, got " + shown(value));
    }
    c->name = value.get<std::string>();
  } else if (key == "threads") {
    TENT_ASSIGN_OR_RETURN(uint64_t v, readUnsigned(value, where, key, 1, kMaxThreads));
    c->threads = static_cast<uint32_t>(v);
  } else if (key == "block_size") {
    TENT_ASSIGN_OR_RETURN(c->block_size, readUnsigned(value, where, key, 1, kMaxBlockBytes));
  } else if (key == "batch_size") {
    TENT_ASSIGN_OR_RETURN(uint64_t v, readUnsigned(value, where, key, 1, kMaxBatch));
    c->batch_size = static_cast<uint32_t>(v);
  } else if (key == "intent_type") {
    TENT_ASSIGN_OR_RETURN(c->intent_type, readIntent(value, where));
    c->intent_given = true;
  } else if (key == "deadline_us") {
    TENT_ASSIGN_OR_RETURN(c->deadline_us, readUnsigned(value, where, key, 0, kMaxMicros));
    c->deadline_given = true;
  } else if (key == "slo_us") {
    TENT_ASSIGN_OR_RETURN(c->slo_us, readUnsigned(value, where, key, 0, kMaxMicros));
  } else if (key == "poll_mode") {
    auto mode = value.is_string() ? parsePollMode(value.get<std::string>())
                                  : Result<PollMode>(Status::InvalidArgument(""));
    if (!mode.ok())
      return fieldError(where, key, "must be \"spin\", \"yield\" or \"wait\", got " + shown(value));
    c->poll_mode = *mode;
    c->poll_given = true;
  } else if (key == "weight") {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
      return fieldError(where, key, "must be a finite number > 0, got " + shown(value));
    }
    c->weight = value.get<double>();
  } else if (key == "isolated_gbps") {
    if (value.is_null()) return Status::OK();  // Mooncake allows null: not given
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
      return fieldError(where, key, "must be a finite number > 0 or null, got " + shown(value));
    }
    c->isolated_gbps = value.get<double>();
  } else {
    std::string allowed;
    for (const auto& k : workloadClassKeys()) allowed += (allowed.empty() ? "" : ", ") + k;
    return fieldError(where, key, "is unknown; allowed fields: " + allowed);
  }
  return Status::OK();
}

Result<WorkloadClass> parseClass(const json& object, size_t index) {
  const std::string where = classLabel(index, object);
  if (!object.is_object()) {
    return Status::InvalidArgument("workload_classes_json: " + where +
                                   " must be a JSON object, got " + shown(object));
  }
  WorkloadClass c;
  for (const auto& [key, value] : object.items()) {
    TENT_RETURN_IF_ERROR(applyField(key, value, where, &c));
  }
  for (const char* required : {"name", "threads", "block_size"}) {
    if (!object.contains(required)) {
      return fieldError(where, required, "is missing (required: name, threads, block_size)");
    }
  }
  return c;
}

}  // namespace

const std::vector<std::string>& workloadClassKeys() {
  static const std::vector<std::string> keys = {
      "name",        "threads", "block_size", "batch_size",    "intent_type",
      "deadline_us", "slo_us",  "weight",     "isolated_gbps", "poll_mode"};
  return keys;
}

Result<IntentType> parseIntentName(std::string_view text) {
  for (const auto& e : kIntents) {
    if (text == e.name) return e.type;
    if (text == std::to_string(static_cast<int>(e.type))) return e.type;
  }
  return Status::InvalidArgument("unknown intent type '" + std::string(text) +
                                 "'; allowed: " + allowedIntents());
}

Result<PollMode> parsePollMode(std::string_view text) {
  if (text == "spin") return PollMode::kSpin;
  if (text == "yield") return PollMode::kYield;
  if (text == "wait") return PollMode::kWait;
  return Status::InvalidArgument("unknown poll mode '" + std::string(text) +
                                 "'; allowed: spin, yield, wait");
}

std::string_view pollModeName(PollMode mode) noexcept {
  switch (mode) {
    case PollMode::kYield:
      return "yield";
    case PollMode::kWait:
      return "wait";
    case PollMode::kSpin:
      break;
  }
  return "spin";
}

std::string_view intentName(IntentType type) noexcept {
  for (const auto& e : kIntents) {
    if (e.type == type) return e.name;
  }
  return "unknown";
}

Result<std::string> loadWorkloadText(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  BoundedFileOptions options;
  options.max_bytes = kMaxFileBytes;
  TENT_ASSIGN_OR_RETURN(BoundedFile file,
                        readBoundedFile(arg.substr(1), "--workload_classes_json file", options));
  return std::move(file.bytes);
}

Result<std::vector<WorkloadClass>> parseWorkloadClasses(std::string_view json_text) {
  if (const size_t at = tooDeepAt(json_text); at != 0) {
    return Status::InvalidArgument(
        "workload_classes_json: nested deeper than " + std::to_string(kMaxDepth) +
        " levels (byte " + std::to_string(at) + "); a class list is an array of flat objects");
  }
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based position of the offending character.
    return Status::InvalidArgument("workload_classes_json: not valid JSON (byte " +
                                   std::to_string(e.byte) + "): " + cut(e.what(), kMaxParserChars));
  } catch (const json::out_of_range& e) {
    // Valid JSON that nlohmann cannot hold, such as 1e400 (no byte position given).
    return Status::InvalidArgument("workload_classes_json: a number is out of range: " +
                                   cut(e.what(), kMaxParserChars));
  }
  if (!root.is_array() || root.empty()) {
    return Status::InvalidArgument(
        "workload_classes_json: expected a non-empty JSON array of class objects");
  }
  std::vector<WorkloadClass> classes;
  std::set<std::string> names;
  for (size_t i = 0; i < root.size(); ++i) {
    TENT_ASSIGN_OR_RETURN(WorkloadClass c, parseClass(root[i], i));
    if (!names.insert(c.name).second) {
      return Status::InvalidArgument("workload_classes_json: class " + std::to_string(i) +
                                     ": duplicate name \"" + cut(c.name, kMaxShownChars) + "\"");
    }
    classes.push_back(std::move(c));
  }
  return classes;
}

uint32_t totalThreads(const std::vector<WorkloadClass>& classes) noexcept {
  uint32_t sum = 0;
  for (const auto& c : classes) sum += c.threads;
  return sum;
}

}  // namespace tent::bench
