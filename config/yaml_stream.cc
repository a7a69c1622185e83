#include "config/yaml_stream.h"

#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>

#include <sstream>
#include <vector>

namespace tent::config::detail {
namespace {

// Only notes where each document starts, and its first node: a first pass over the
// stream that counts its documents and sees whether the parser is stuck, building no node.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;  // per document: its first token ("---" when given)
  std::vector<YAML::Mark> nodes;   // per document: its first node (what messages cite)

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark) {
    if (nodes.size() < starts.size()) nodes.push_back(mark);
  }
};

}  // namespace

YamlStream readYamlStream(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts handler;
  while (parser.HandleNextDocument(handler)) {
    const size_t n = handler.starts.size();
    // A document that consumed no token leaves the next one starting where it did:
    // yaml-cpp would hand out null documents from there for ever.
    if (n >= 2 && handler.starts[n - 1].pos == handler.starts[n - 2].pos) {
      const YAML::Mark& at = handler.starts[n - 1];
      const size_t pos = static_cast<size_t>(at.pos);
      const std::string token = pos < text.size() ? std::string(1, text[pos]) : "end of input";
      throw YAML::ParserException(at, "unexpected '" + token + "': no YAML node starts with it");
    }
  }
  YamlStream stream;
  stream.documents = handler.starts.size();
  if (stream.documents >= 2) {
    const YAML::Mark& second = handler.nodes.size() >= 2 ? handler.nodes[1] : handler.starts[1];
    stream.second_line = second.line + 1;
  }
  if (stream.documents >= 1) stream.first = YAML::Load(text);
  return stream;
}

}  // namespace tent::config::detail
