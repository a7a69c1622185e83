// Private to config/: a typed, validating reader over one YAML map.
//
// The same section functions (parse.cc) drive three walks, so the parser, the key
// list behind docs/config.md and the YAML writer cannot drift apart:
//   parse:    read values from YAML into the structs, first error wins;
//   describe: record every key's path, what it allows and its current (default) value;
//   emit:     write the structs' current values as YAML.
// No yaml-cpp exception leaves this file's functions: callers wrap the walk anyway
// (config.cc) because yaml-cpp may throw from places we do not anticipate.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "tent/status.h"

namespace tent::config::detail {

enum class WalkMode : uint8_t { kParse, kDescribe, kEmit };

// State shared by every reader of one walk.
class Walk {
 public:
  static Walk parse(std::string source) { return Walk(WalkMode::kParse, std::move(source)); }
  static Walk describe(std::vector<KeyInfo>* keys);
  static Walk emit(YAML::Emitter* out);

  WalkMode mode() const noexcept { return mode_; }
  bool failed() const noexcept { return !status_.ok(); }
  const Status& status() const noexcept { return status_; }
  const std::string& source() const noexcept { return source_; }
  YAML::Emitter& emitter() { return *emitter_; }

  // Keeps the first error: "<source>:<line>: <path>: <what>".
  void fail(int line, std::string_view path, std::string_view what);
  void addKey(KeyInfo key);

 private:
  Walk(WalkMode mode, std::string source) : mode_(mode), source_(std::move(source)) {}

  WalkMode mode_;
  std::string source_;
  Status status_;
  std::vector<KeyInfo>* keys_ = nullptr;
  YAML::Emitter* emitter_ = nullptr;
};

// What a string value must look like: a phrase for messages and docs, and a test.
struct TextRule {
  std::string_view expected;             // "a PCI address such as 0000:3b:00.0, or empty"
  bool (*valid)(std::string_view text);  // nullptr: any string
};

// Checks one item of a string list; returns "" when it is fine, else the message
// that follows "<file>:<line>: <path>[i]: ".
using ItemCheck = std::function<std::string(std::string_view text, size_t index)>;

template <typename E>
using EnumNames = std::vector<std::pair<std::string_view, E>>;

class MapReader {
 public:
  // `node` may be undefined or null (the section is absent: every key keeps its value).
  MapReader(Walk& walk, const YAML::Node& node, std::string path, int line);

  const std::string& path() const noexcept { return path_; }
  Walk& walk() noexcept { return walk_; }
  bool parsing() const noexcept { return walk_.mode() == WalkMode::kParse; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // 1-based line of the key's value when present, else of this map.
  int lineOf(std::string_view key) const;
  std::string pathOf(std::string_view key) const;

  // Marks a key that must be present (parse) and shows "(required)" in the key list.
  void require(std::string_view key);
  // A key that no longer exists: naming it fails with a pointer to its replacement.
  void replacedBy(std::string_view key, std::string_view replacement);

  void integer(std::string_view key, int64_t* out, int64_t lo, int64_t hi);
  template <typename T>
  void integer(std::string_view key, T* out, int64_t lo, int64_t hi) {
    int64_t v = static_cast<int64_t>(*out);
    integer(key, &v, lo, hi);
    *out = static_cast<T>(v);
  }
  // A byte size: an integer, or a count with a binary unit ("64k", "1MiB"), the same
  // rule as every command-line flag (base/byte_size.h).
  void byteSize(std::string_view key, int64_t* out, int64_t lo, int64_t hi);
  template <typename T>
  void byteSize(std::string_view key, T* out, int64_t lo, int64_t hi) {
    int64_t v = static_cast<int64_t>(*out);
    byteSize(key, &v, lo, hi);
    *out = static_cast<T>(v);
  }
  void powerOfTwo(std::string_view key, uint32_t* out, uint32_t lo, uint32_t hi);
  void integerChoice(std::string_view key, uint32_t* out, const std::vector<uint32_t>& allowed);
  void real(std::string_view key, double* out, double lo, double hi);
  void boolean(std::string_view key, bool* out);
  void text(std::string_view key, std::string* out, const TextRule& rule);
  void textChoice(std::string_view key, std::string* out,
                  const std::vector<std::string_view>& allowed);
  template <typename E>
  void choice(std::string_view key, E* out, const EnumNames<E>& names);

  // A list of strings, each checked by `check` (may be empty).
  void stringList(std::string_view key, std::vector<std::string>* out, std::string_view expected,
                  const ItemCheck& check);
  // A map from names in `allowed_keys` to strings allowed by `values`.
  void stringMap(std::string_view key, std::map<std::string, std::string>* out,
                 const std::vector<std::string_view>& allowed_keys,
                 const std::vector<std::string_view>& values);

  // A nested map; `read` runs the section's reads on a child reader.
  void section(std::string_view key, const std::function<void(MapReader&)>& read);

  // A list of maps. Parse: replaces *out when the key is present. Describe: lists
  // the item keys under "<key>[]", with the current list as the default.
  template <typename Item>
  void mapList(std::string_view key, std::vector<Item>* out,
               const std::function<void(MapReader&, Item&, size_t)>& read_item);
  // A list of maps, or instead one word (`lcores: auto`): *is_word says which. The
  // word clears *out; a list clears *is_word.
  template <typename Item>
  void mapListOrWord(std::string_view key, std::vector<Item>* out, std::string_view word,
                     bool* is_word,
                     const std::function<void(MapReader&, Item&, size_t)>& read_item);

  // A failed cross-field check, reported at `key`'s line with its full path.
  void fail(std::string_view key, std::string_view what);
  // Parse: reports keys that are not allowed here, naming the allowed ones.
  void finish();

 private:
  struct Entry {
    std::string key;
    YAML::Node value;
    int line;
  };

  const Entry* find(std::string_view key) const;
  // Parse: the entry when present and the walk has not failed; records the key as known.
  const Entry* lookup(std::string_view key);
  void index(const YAML::Node& node);
  void failValue(const Entry& e, std::string_view expected);
  void describeKey(std::string_view key, std::string expected, std::string value);
  template <typename Item>
  std::string itemsAsText(std::vector<Item>* items,
                          const std::function<void(MapReader&, Item&, size_t)>& read_item);
  template <typename Item>
  void emitItems(std::vector<Item>* items,
                 const std::function<void(MapReader&, Item&, size_t)>& read_item);

  Walk& walk_;
  std::string path_;
  int line_;
  bool not_a_map_ = false;
  std::string got_;  // what the node was when it is not a map
  std::vector<Entry> entries_;
  std::vector<std::string> known_;     // keys asked for, in order (for "allowed: ...")
  std::vector<std::string> required_;  // keys marked by require()
};

// ---- helpers shared with parse.cc -------------------------------------------

// "'big'", "a map", "a list", "nothing".
std::string describeNode(const YAML::Node& node);
int lineOfNode(const YAML::Node& node);
std::string joinNames(const std::vector<std::string_view>& names);
std::string quoted(std::string_view text);  // "\"text\"" as YAML would write it

// ---- templates ----------------------------------------------------------------

template <typename E>
void MapReader::choice(std::string_view key, E* out, const EnumNames<E>& names) {
  std::vector<std::string_view> allowed;
  std::string_view current;
  for (const auto& [name, value] : names) {
    allowed.push_back(name);
    if (value == *out) current = name;
  }
  std::string text(current);
  textChoice(key, &text, allowed);
  for (const auto& [name, value] : names) {
    if (name == text) *out = value;
  }
}

template <typename Item>
std::string MapReader::itemsAsText(
    std::vector<Item>* items, const std::function<void(MapReader&, Item&, size_t)>& read_item) {
  YAML::Emitter flow;
  flow.SetMapFormat(YAML::Flow);
  flow.SetSeqFormat(YAML::Flow);
  Walk walk = Walk::emit(&flow);
  MapReader top(walk, YAML::Node(), path_, 0);
  top.emitItems(items, read_item);
  return flow.good() ? std::string(flow.c_str()) : std::string("?");
}

template <typename Item>
void MapReader::emitItems(std::vector<Item>* items,
                          const std::function<void(MapReader&, Item&, size_t)>& read_item) {
  YAML::Emitter& em = walk_.emitter();
  if (items->empty()) em << YAML::Flow;  // "[]" rather than an empty block
  em << YAML::BeginSeq;
  for (size_t i = 0; i < items->size(); ++i) {
    em << YAML::BeginMap;
    MapReader child(walk_, YAML::Node(), path_, 0);
    read_item(child, (*items)[i], i);
    em << YAML::EndMap;
  }
  em << YAML::EndSeq;
}

template <typename Item>
void MapReader::mapListOrWord(std::string_view key, std::vector<Item>* out, std::string_view word,
                              bool* is_word,
                              const std::function<void(MapReader&, Item&, size_t)>& read_item) {
  const std::string expected = "a list of maps, or " + std::string(word);
  if (walk_.mode() == WalkMode::kDescribe) {
    describeKey(key, expected, *is_word ? std::string(word) : itemsAsText(out, read_item));
    Item item{};
    MapReader child(walk_, YAML::Node(), pathOf(key) + "[]", 0);
    read_item(child, item, 0);
    return;
  }
  if (walk_.mode() == WalkMode::kEmit && *is_word) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value << std::string(word);
    return;
  }
  if (walk_.mode() == WalkMode::kParse) {
    const Entry* e = lookup(key);
    if (e == nullptr) return;
    if (e->value.IsScalar() && e->value.Scalar() == word) {
      *is_word = true;
      out->clear();
      return;
    }
    if (!e->value.IsSequence()) return failValue(*e, expected);
    *is_word = false;
  }
  mapList(key, out, read_item);
}

template <typename Item>
void MapReader::mapList(std::string_view key, std::vector<Item>* out,
                        const std::function<void(MapReader&, Item&, size_t)>& read_item) {
  if (walk_.mode() == WalkMode::kDescribe) {
    describeKey(key, "a list of maps", itemsAsText(out, read_item));
    Item item{};
    MapReader child(walk_, YAML::Node(), pathOf(key) + "[]", 0);
    read_item(child, item, 0);
    return;
  }
  if (walk_.mode() == WalkMode::kEmit) {
    walk_.emitter() << YAML::Key << std::string(key) << YAML::Value;
    emitItems(out, read_item);
    return;
  }
  const Entry* e = lookup(key);
  if (e == nullptr) return;
  if (!e->value.IsSequence()) return failValue(*e, "a list of maps");
  std::vector<Item> items;
  for (size_t i = 0; i < e->value.size() && !walk_.failed(); ++i) {
    const YAML::Node item_node = e->value[i];
    Item item{};
    MapReader child(walk_, item_node, pathOf(key) + "[" + std::to_string(i) + "]",
                    lineOfNode(item_node));
    read_item(child, item, i);
    child.finish();
    items.push_back(std::move(item));
  }
  if (!walk_.failed()) *out = std::move(items);
}

}  // namespace tent::config::detail
