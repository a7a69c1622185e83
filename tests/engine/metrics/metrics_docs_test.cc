// docs/metrics.md against a real scrape: the families exported are exactly the rows
// of its series tables, each with the documented type and label names.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "scrape_util.h"
#include "tests/support/engine_test_util.h"

namespace tent::metrics::testing {
namespace {

struct DocRow {
  std::string type;
  std::set<std::string> labels;
  std::string line;
};

std::string readDocs() {
  const char* dir = std::getenv("TENT_TEST_SRCDIR");
  std::ifstream in(std::string(dir != nullptr ? dir : ".") + "/docs/metrics.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The `backticked` words of one table cell.
std::set<std::string> backticked(const std::string& cell) {
  std::set<std::string> words;
  for (size_t at = cell.find('`'); at != std::string::npos; at = cell.find('`', at + 1)) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    words.insert(cell.substr(at + 1, end - at - 1));
    at = end;
  }
  return words;
}

// Rows of the tables whose header starts "| series |": name -> type and labels.
std::map<std::string, DocRow> documentedSeries(const std::string& text) {
  std::map<std::string, DocRow> rows;
  std::istringstream in(text);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    if (line.rfind("| series |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string cell; std::getline(cols, cell, '|');) cells.push_back(cell);
    if (cells.size() < 5) {
      ADD_FAILURE() << "a series row needs 5 cells: " << line;
      continue;
    }
    const std::string name = *backticked(cells[0]).begin();
    std::istringstream type(cells[1]);
    DocRow row{"", backticked(cells[2]), line};
    type >> row.type;
    EXPECT_EQ(rows.count(name), 0u) << "documented twice: " << name;
    rows[name] = row;
  }
  return rows;
}

// The family a sample belongs to: its name, or without a histogram/summary suffix.
std::string familyOf(const std::string& sample, const std::map<std::string, std::string>& types) {
  if (types.count(sample) != 0) return sample;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      const std::string base = sample.substr(0, sample.size() - s.size());
      if (types.count(base) != 0) return base;
    }
  }
  return sample;
}

TEST(MetricsDocs, EveryExportedFamilyIsDocumentedAndNothingElse) {
  auto engine =
      tent::testing::makeEngine(tent::testing::simYaml("metrics: {listen: \"127.0.0.1:0\"}\n"));
  ASSERT_NE(engine, nullptr);
  const HttpReply reply = httpGet(engine->metricsExporter()->port(), "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.error;
  const Exposition e = parseExposition(reply.body);
  const std::map<std::string, DocRow> docs = documentedSeries(readDocs());
  ASSERT_FALSE(docs.empty()) << "no series rows in docs/metrics.md (TENT_TEST_SRCDIR?)";

  for (const auto& [name, type] : e.types) {
    auto it = docs.find(name);
    if (it == docs.end()) {
      ADD_FAILURE() << "docs/metrics.md has no row for " << name << " (" << type << ")";
      continue;
    }
    EXPECT_EQ(it->second.type, type) << it->second.line;
  }
  for (const auto& [name, row] : docs)
    EXPECT_EQ(e.types.count(name), 1u) << "documented but not exported: " << name;

  // Label names per family, as exported (le and quantile belong to the type).
  std::map<std::string, std::set<std::string>> labels;
  for (const Sample& s : e.samples) {
    auto& names = labels[familyOf(s.name, e.types)];
    for (const auto& [label, value] : s.labels)
      if (label != "le" && label != "quantile") names.insert(label);
  }
  // Every engine series carries `engine` (docs/metrics.md says so once, not per row).
  for (auto [family, names] : labels) {
    if (family.rfind("tent_", 0) == 0 && family != "tent_build_info") {
      EXPECT_EQ(names.erase("engine"), 1u) << family << " has no engine label";
    }
    auto it = docs.find(family);
    if (it != docs.end()) {
      EXPECT_EQ(names, it->second.labels) << it->second.line;
    }
  }
}

TEST(MetricsDocs, TheYamlExampleParses) {
  const std::string text = readDocs();
  const size_t begin = text.find("```yaml\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  auto c = config::loadString(text.substr(begin + 8, end - begin - 8), "docs/metrics.md");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_FALSE((*c)->metrics.listen.empty());
}

}  // namespace
}  // namespace tent::metrics::testing
