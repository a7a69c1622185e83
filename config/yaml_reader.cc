#include "config/yaml_reader.h"

#include "base/byte_size.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace tent::config::detail {
namespace {

// Scalars are quoted back to the user; a huge one would drown the message.
constexpr size_t kMaxShownChars = 60;

bool parseInteger(std::string_view text, int64_t* out) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return false;
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  // Every range we check lies well inside int64; clamp so "too big" reads as out of range.
  constexpr uint64_t kLimit = static_cast<uint64_t>(INT64_MAX);
  int64_t v = static_cast<int64_t>(std::min(magnitude, kLimit));
  *out = negative ? -v : v;
  return true;
}

bool parseReal(std::string_view text, double* out) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parseBool(std::string_view text, bool* out) {
  // YAML 1.2 core schema only: "yes"/"on" are strings there, so they are errors here.
  for (std::string_view t : {"true", "True", "TRUE"}) {
    if (text == t) return (*out = true), true;
  }
  for (std::string_view f : {"false", "False", "FALSE"}) {
    if (text == f) return (*out = false), true;
  }
  return false;
}

std::string realText(double v) {
  char buf[64];
  // Fixed notation reads like the docs (100000, not 1e+05) and still round-trips.
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

std::string rangeText(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

bool isPowerOfTwo(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

bool inRange(std::string_view s, size_t i, unsigned lo, unsigned hi) {
  if (i >= s.size()) return false;
  const auto c = static_cast<unsigned char>(s[i]);
  return c >= lo && c <= hi;
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0.
size_t utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  unsigned lo = 0x80;
  unsigned hi = 0xbf;
  size_t n = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (!inRange(s, i + 1, lo, hi)) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (!inRange(s, i + k, 0x80, 0xbf)) return 0;
  }
  return n;
}

std::string hexByte(unsigned char c) {
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[c >> 4] + kDigits[c & 0xf];
}

// Why a string value is refused, or "" when it is printable UTF-8. yaml-cpp keeps
// any bytes, but its emitter replaces what is not UTF-8 (toYaml would change the
// value), and a NUL or other control byte would cut a path or an EAL argument short.
std::string textProblem(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::string where = " at offset " + std::to_string(i);
    if (c < 0x20 || c == 0x7f) return "control character " + hexByte(c) + where;
    const size_t n = utf8Length(s, i);
    if (n == 0) return "byte " + hexByte(c) + where + " (not UTF-8)";
    i += n;
  }
  return "";
}

constexpr std::string_view kPrintable = "expected printable UTF-8 text, got ";

}  // namespace

// ---- helpers ------------------------------------------------------------------

std::string describeNode(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  std::string text = node.Scalar();
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars) + "...";
  return "'" + text + "'";
}

int lineOfNode(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const int line = node.Mark().line;
  return line >= 0 ? line + 1 : 0;
}

std::string joinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out;
}

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// ---- Walk -----------------------------------------------------------------------

Walk Walk::describe(std::vector<KeyInfo>* keys) {
  Walk w(WalkMode::kDescribe, "<describe>");
  w.keys_ = keys;
  return w;
}

Walk Walk::emit(YAML::Emitter* out) {
  Walk w(WalkMode::kEmit, "<emit>");
  w.emitter_ = out;
  return w;
}

void Walk::fail(int line, std::string_view path, std::string_view what) {
  if (mode_ != WalkMode::kParse || failed()) return;
  std::string msg = source_;
  if (line > 0) msg += ":" + std::to_string(line);
  msg += ": ";
  if (!path.empty()) msg += std::string(path) + ": ";
  msg += what;
  status_ = Status::InvalidArgument(std::move(msg));
}

void Walk::addKey(KeyInfo key) {
  if (keys_ != nullptr) keys_->push_back(std::move(key));
}

// ---- MapReader: structure --------------------------------------------------------

MapReader::MapReader(Walk& walk, const YAML::Node& node, std::string path, int line)
    : walk_(walk), path_(std::move(path)), line_(line) {
  if (walk_.mode() == WalkMode::kParse) index(node);
}

void MapReader::index(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    not_a_map_ = true;
    got_ = describeNode(node);
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    const int key_line = lineOfNode(key);
    if (!key.IsScalar()) {
      walk_.fail(key_line, path_, "keys must be plain names, got " + describeNode(key));
      return;
    }
    if (const Entry* first = find(key.Scalar())) {
      walk_.fail(key_line, pathOf(key.Scalar()),
                 "duplicate key (first given at line " + std::to_string(first->line) + ")");
      return;
    }
    // A missing value ("key:") is marked at the next token; the key's line is the useful one.
    const int value_line = it->second.IsNull() ? 0 : lineOfNode(it->second);
    entries_.push_back({key.Scalar(), it->second, value_line > 0 ? value_line : key_line});
  }
}

const MapReader::Entry* MapReader::find(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

const MapReader::Entry* MapReader::lookup(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  if (walk_.failed()) return nullptr;
  return find(key);
}

int MapReader::lineOf(std::string_view key) const {
  const Entry* e = find(key);
  return e != nullptr ? e->line : line_;
}

std::string MapReader::pathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void MapReader::require(std::string_view key) {
  required_.emplace_back(key);
}

void MapReader::replacedBy(std::string_view key, std::string_view replacement) {
  if (walk_.mode() != WalkMode::kParse || walk_.failed()) return;
  if (find(key) != nullptr)
    fail(key, "this key was replaced by " + std::string(replacement) + " (see docs/config.md)");
}

void MapReader::fail(std::string_view key, std::string_view what) {
  walk_.fail(lineOf(key), pathOf(key), what);
}

void MapReader::failValue(const Entry& e, std::string_view expected) {
  walk_.fail(e.line, pathOf(e.key),
             "expected " + std::string(expected) + ", got " + describeNode(e.value));
}

void MapReader::describeKey(std::string_view key, std::string expected, std::string value) {
  if (std::find(required_.begin(), required_.end(), key) != required_.end()) value = "(required)";
  walk_.addKey({pathOf(key), std::move(expected), std::move(value)});
}

void MapReader::finish() {
  if (walk_.mode() != WalkMode::kParse || walk_.failed()) return;
  std::vector<std::string_view> allowed(known_.begin(), known_.end());
  const std::string where = path_.empty() ? "top-level keys" : "keys of " + path_;
  if (not_a_map_) {
    return walk_.fail(line_, path_,
                      "expected a map with keys " + joinNames(allowed) + ", got " + got_);
  }
  for (const Entry& e : entries_) {
    if (std::find(known_.begin(), known_.end(), e.key) == known_.end()) {
      return walk_.fail(e.line, pathOf(e.key),
                        "unknown key; allowed " + where + ": " + joinNames(allowed));
    }
  }
  for (const std::string& key : required_) {
    if (find(key) == nullptr) return walk_.fail(line_, pathOf(key), "required key is missing");
  }
}

// ---- MapReader: scalars ------------------------------------------------------------

void MapReader::integer(std::string_view key, int64_t* out, int64_t lo, int64_t hi) {
  const std::string expected = "an integer in " + rangeText(lo, hi);
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, std::to_string(*out));
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << static_cast<long long>(*out);
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  int64_t v = 0;
  if (!e->value.IsScalar() || !parseInteger(e->value.Scalar(), &v) || v < lo || v > hi) {
    return failValue(*e, expected);
  }
  *out = v;
}

void MapReader::byteSize(std::string_view key, int64_t* out, int64_t lo, int64_t hi) {
  const std::string expected =
      "a size in " + rangeText(lo, hi) + " (" + std::string(kByteSizeRule) + ")";
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, std::to_string(*out));
  if (walk_.mode() == WalkMode::kEmit) return integer(key, out, lo, hi);
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  if (!e->value.IsScalar()) return failValue(*e, expected);
  auto v = parseByteSize(e->value.Scalar());
  if (!v.ok() || *v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi))
    return failValue(*e, expected);
  *out = static_cast<int64_t>(*v);
}

void MapReader::powerOfTwo(std::string_view key, uint32_t* out, uint32_t lo, uint32_t hi) {
  const std::string expected = "a power of two in " + rangeText(lo, hi);
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, std::to_string(*out));
  int64_t v = *out;
  if (walk_.mode() == WalkMode::kEmit) return integer(key, &v, lo, hi);
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  if (!e->value.IsScalar() || !parseInteger(e->value.Scalar(), &v) || v < lo || v > hi ||
      !isPowerOfTwo(v)) {
    return failValue(*e, expected);
  }
  *out = static_cast<uint32_t>(v);
}

void MapReader::integerChoice(std::string_view key, uint32_t* out,
                              const std::vector<uint32_t>& allowed) {
  std::string expected = "one of ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    expected += (i > 0 ? ", " : "") + std::to_string(allowed[i]);
  }
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, std::to_string(*out));
  int64_t v = *out;
  if (walk_.mode() == WalkMode::kEmit) return integer(key, &v, 0, 0);
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  const bool listed = e->value.IsScalar() && parseInteger(e->value.Scalar(), &v) &&
                      std::find(allowed.begin(), allowed.end(), v) != allowed.end();
  if (!listed) return failValue(*e, expected);
  *out = static_cast<uint32_t>(v);
}

void MapReader::real(std::string_view key, double* out, double lo, double hi) {
  const std::string expected = "a number in [" + realText(lo) + ", " + realText(hi) + "]";
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, realText(*out));
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << realText(*out);
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  double v = 0;
  if (!e->value.IsScalar() || !parseReal(e->value.Scalar(), &v) || v < lo || v > hi) {
    return failValue(*e, expected);
  }
  *out = v;
}

void MapReader::boolean(std::string_view key, bool* out) {
  if (walk_.mode() == WalkMode::kDescribe) {
    return describeKey(key, "true or false", *out ? "true" : "false");
  }
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << *out;
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  bool v = false;
  if (!e->value.IsScalar() || !parseBool(e->value.Scalar(), &v)) {
    return failValue(*e, "true or false");
  }
  *out = v;
}

void MapReader::text(std::string_view key, std::string* out, const TextRule& rule) {
  if (walk_.mode() == WalkMode::kDescribe) {
    return describeKey(key, std::string(rule.expected), quoted(*out));
  }
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << YAML::DoubleQuoted << *out;
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  if (!e->value.IsScalar()) return failValue(*e, rule.expected);
  if (const std::string problem = textProblem(e->value.Scalar()); !problem.empty()) {
    return walk_.fail(e->line, pathOf(e->key), std::string(kPrintable) + problem);
  }
  if (rule.valid != nullptr && !rule.valid(e->value.Scalar())) return failValue(*e, rule.expected);
  *out = e->value.Scalar();
}

void MapReader::textChoice(std::string_view key, std::string* out,
                           const std::vector<std::string_view>& allowed) {
  const std::string expected = "one of " + joinNames(allowed);
  if (walk_.mode() == WalkMode::kDescribe) return describeKey(key, expected, *out);
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << *out;
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  const bool listed = e->value.IsScalar() &&
                      std::find(allowed.begin(), allowed.end(), e->value.Scalar()) != allowed.end();
  if (!listed) return failValue(*e, expected);
  *out = e->value.Scalar();
}

// ---- MapReader: collections -----------------------------------------------------------

void MapReader::stringList(std::string_view key, std::vector<std::string>* out,
                           std::string_view expected, const ItemCheck& check) {
  const std::string list_expected = "a list of " + std::string(expected);
  if (walk_.mode() == WalkMode::kDescribe) {
    std::string shown = "[";
    for (size_t i = 0; i < out->size(); ++i) shown += (i > 0 ? ", " : "") + quoted((*out)[i]);
    return describeKey(key, list_expected, shown + "]");
  }
  if (walk_.mode() == WalkMode::kEmit) {
    YAML::Emitter& em = walk_.emitter();
    em << YAML::Key << std::string(key) << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& s : *out) em << YAML::DoubleQuoted << s;
    em << YAML::EndSeq;
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  if (!e->value.IsSequence()) return failValue(*e, list_expected);
  std::vector<std::string> items;
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    const std::string item_path = pathOf(key) + "[" + std::to_string(i) + "]";
    const int line = lineOfNode(item) > 0 ? lineOfNode(item) : e->line;
    if (!item.IsScalar()) {
      return walk_.fail(line, item_path,
                        "expected " + std::string(expected) + ", got " + describeNode(item));
    }
    if (const std::string problem = textProblem(item.Scalar()); !problem.empty()) {
      return walk_.fail(line, item_path, std::string(kPrintable) + problem);
    }
    if (check) {
      const std::string problem = check(item.Scalar(), i);
      if (!problem.empty()) return walk_.fail(line, item_path, problem);
    }
    items.push_back(item.Scalar());
  }
  *out = std::move(items);
}

void MapReader::stringMap(std::string_view key, std::map<std::string, std::string>* out,
                          const std::vector<std::string_view>& allowed_keys,
                          const std::vector<std::string_view>& values) {
  const std::string expected =
      "a map from {" + joinNames(allowed_keys) + "} to one of " + joinNames(values);
  if (walk_.mode() == WalkMode::kDescribe) {
    std::string shown = "{";
    for (const auto& [k, v] : *out) shown += (shown.size() > 1 ? ", " : "") + k + ": " + v;
    return describeKey(key, expected, shown + "}");
  }
  if (walk_.mode() == WalkMode::kEmit) {
    YAML::Emitter& em = walk_.emitter();
    em << YAML::Key << std::string(key) << YAML::Value;
    if (out->empty()) em << YAML::Flow;
    em << YAML::BeginMap;
    for (const auto& [k, v] : *out) em << YAML::Key << k << YAML::Value << v;
    em << YAML::EndMap;
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  std::map<std::string, std::string> result;
  MapReader child(walk_, e->value, pathOf(key), e->line);
  for (std::string_view name : allowed_keys) {
    std::string level;
    if (!child.has(name)) {
      child.lookup(name);  // known, so it is listed as allowed
      continue;
    }
    child.textChoice(name, &level, values);
    if (!walk_.failed()) result[std::string(name)] = level;
  }
  child.finish();
  if (!walk_.failed()) *out = std::move(result);
}

void MapReader::section(std::string_view key, const std::function<void(MapReader&)>& read) {
  if (walk_.mode() == WalkMode::kDescribe) {
    MapReader child(walk_, YAML::Node(), pathOf(key), 0);
    return read(child);
  }
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << YAML::BeginMap;
    MapReader child(walk_, YAML::Node(), pathOf(key), 0);
    read(child);
    walk_.emitter() << YAML::EndMap;
    return;
  }
  const Entry* e = lookup(key);
  MapReader child(walk_, e != nullptr ? e->value : YAML::Node(), pathOf(key),
                  e != nullptr ? e->line : line_);
  read(child);
  child.finish();
}

}  // namespace tent::config::detail
