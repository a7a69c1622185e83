// docs/config.md and config/examples/default.yaml against the parser's own key
// list: every key documented with its current default, nothing documented that
// the parser does not know, every key present in default.yaml.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config_test_util.h"

namespace tent::config {
namespace {

using testing::readText;
using testing::srcDir;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Rows of the key tables (those whose header starts "| key |"), with the key of
// their first cell: "| `workers.block_size` | ... |" -> {"workers.block_size", row}.
std::vector<std::pair<std::string, std::string>> keyRows(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> rows;
  bool in_key_table = false;
  for (const std::string& line : lines(text)) {
    if (line.rfind("|", 0) != 0) {
      in_key_table = false;
      continue;
    }
    if (line.rfind("| key |", 0) == 0) {
      in_key_table = true;
      continue;
    }
    if (!in_key_table || line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) rows.emplace_back(line.substr(3, end - 3), line);
  }
  return rows;
}

std::string docsText() {
  const std::string text = readText(srcDir() + "/docs/config.md");
  EXPECT_FALSE(text.empty()) << "cannot read docs/config.md under TENT_TEST_SRCDIR=" << srcDir();
  return text;
}

TEST(ConfigKeyList, IsCompleteAndUnique) {
  const auto& keys = keyList();
  std::set<std::string> paths;
  for (const KeyInfo& k : keys) {
    EXPECT_NE(k.path, "<error>") << k.allowed;
    EXPECT_FALSE(k.allowed.empty()) << k.path;
    EXPECT_FALSE(k.default_value.empty()) << k.path;
    EXPECT_TRUE(paths.insert(k.path).second) << "listed twice: " << k.path;
  }
  for (const char* expected :
       {"eal.mode", "lcores", "lcores[].cpu", "lcores[].pollers", "lcores[].idle.sleep_max_us",
        "fabric.soft.devices[].latency_ns", "fabric.verbs.gid_index", "topology.xml_file",
        "workers.block_size", "direct.qp_depth", "bootstrap.listen", "timeouts.endpoint_destroy_ms",
        "log.components"}) {
    EXPECT_EQ(paths.count(expected), 1u) << expected;
  }
}

TEST(ConfigKeyList, DefaultsAreTheStructDefaults) {
  std::map<std::string, std::string> defaults;
  for (const KeyInfo& k : keyList()) defaults[k.path] = k.default_value;
  EXPECT_EQ(defaults["workers.block_size"], "65536");
  EXPECT_EQ(defaults["bootstrap.listen"], "\"127.0.0.1:0\"");
  EXPECT_EQ(defaults["direct.mode"], "auto");
  EXPECT_EQ(defaults["fabric.soft.devices[].name"], "(required)");
  EXPECT_EQ(defaults["lcores[].cpu"], "-1");
  EXPECT_EQ(defaults["lcores"],
            "[{cpu: -1, pollers: [\"rail:*\", \"background\"], idle: {spin_polls: 256, "
            "pause_polls: 2048, sleep_min_us: 1, sleep_max_us: 100, block_max_us: 100000}}]");
  EXPECT_EQ(defaults["lcore_auto.rails"], "auto");
  EXPECT_EQ(defaults["lcore_auto.idle.block_max_us"], "100000");
}

TEST(ConfigDocs, EveryKeyIsDocumentedWithItsDefault) {
  const auto rows = keyRows(docsText());
  for (const KeyInfo& k : keyList()) {
    const std::string* row = nullptr;
    for (const auto& [key, line] : rows) {
      if (key == k.path) row = &line;
    }
    if (row == nullptr) {
      ADD_FAILURE() << "docs/config.md has no row for " << k.path << "; add e.g.\n| `" << k.path
                    << "` | ... | `" << k.default_value << "` | " << k.allowed << " | ... |";
      continue;
    }
    const std::string shown =
        k.default_value == "(required)" ? "required" : "`" + k.default_value + "`";
    EXPECT_NE(row->find(shown), std::string::npos)
        << "the row of " << k.path << " does not show the default " << shown << ":\n"
        << *row;
  }
}

TEST(ConfigDocs, DocumentsNoKeyTheParserDoesNotKnow) {
  std::set<std::string> known;
  for (const KeyInfo& k : keyList()) known.insert(k.path);
  const auto rows = keyRows(docsText());
  std::set<std::string> documented;
  for (const auto& [key, line] : rows) {
    EXPECT_EQ(known.count(key), 1u) << "docs/config.md documents an unknown key: " << key;
    EXPECT_TRUE(documented.insert(key).second) << "documented twice: " << key;
  }
  EXPECT_EQ(documented.size(), known.size());
}

TEST(ConfigDocs, YamlExamplesInTheDocsParse) {
  const std::string text = docsText();
  size_t examples = 0;
  for (size_t at = text.find("```yaml\n"); at != std::string::npos;
       at = text.find("```yaml\n", at + 1)) {
    const size_t begin = at + 8;
    const size_t end = text.find("```", begin);
    ASSERT_NE(end, std::string::npos);
    auto r = loadString(text.substr(begin, end - begin), "docs/config.md example");
    EXPECT_TRUE(r.ok()) << r.status().toString();
    ++examples;
  }
  EXPECT_GE(examples, 1u);
}

// "name:" as a whole key (not the tail of "default_name:").
bool hasKey(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name + ":"); at != std::string::npos;
       at = text.find(name + ":", at + 1)) {
    const char before = at == 0 ? ' ' : text[at - 1];
    if (std::isalnum(static_cast<unsigned char>(before)) == 0 && before != '_') return true;
  }
  return false;
}

TEST(ConfigDocs, DefaultYamlSpellsOutEveryKey) {
  const std::string text = readText(testing::examplePath("default.yaml"));
  ASSERT_FALSE(text.empty());
  for (const KeyInfo& k : keyList()) {
    const std::string leaf = k.path.substr(k.path.find_last_of(".]") + 1);
    const std::string name = leaf.empty() ? k.path : leaf;
    EXPECT_TRUE(hasKey(text, name)) << "default.yaml lacks " << k.path;
  }
}

// Config says what the engine does: every key of the schema is read somewhere outside
// the parser (the engine, lcores, topology, the EAL arguments, the CQ sizing), as a
// member access of its field. A key only the parser knows (workers.post_batch was
// one) fails here.
TEST(ConfigKeys, EveryKeyReachesTheEngine) {
  namespace fs = std::filesystem;
  std::string sources;
  for (const char* dir : {"engine", "lcore", "topology", "config"}) {
    for (const auto& e : fs::recursive_directory_iterator(srcDir() + "/" + dir)) {
      const std::string path = e.path().string();
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      const std::string name = e.path().filename().string();
      // The schema itself (and the YAML plumbing) does not count as reading a key.
      if (dir == std::string("config") &&
          (name == "parse.cc" || name == "config.h" || name.rfind("yaml_", 0) == 0))
        continue;
      sources += readText(path);
      sources += "\n";
    }
  }
  ASSERT_FALSE(sources.empty());
  size_t checked = 0;
  for (const KeyInfo& k : keyList()) {
    std::string leaf = k.path.substr(k.path.find_last_of(".]") + 1);
    if (leaf.empty()) leaf = k.path;
    const bool read = sources.find("." + leaf) != std::string::npos ||
                      sources.find("->" + leaf) != std::string::npos;
    EXPECT_TRUE(read) << k.path << ": no code outside the parser reads ." << leaf;
    ++checked;
  }
  EXPECT_EQ(checked, keyList().size());
}

}  // namespace
}  // namespace tent::config
