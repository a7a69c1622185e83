// Private to config/: reads a YAML stream without YAML::LoadAll, which in yaml-cpp 0.7
// (Debian 12) loops for ever, allocating a null document per turn, when a document
// starts with a token no node can start with, such as a lone ',' (jbeder/yaml-cpp#1040,
// fixed after 0.8 by yaml-cpp PR #1319).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

namespace tent::config::detail {

struct YamlStream {
  YAML::Node first;      // the first document; undefined when the stream has none
  size_t documents = 0;  // how many documents the stream holds
  int second_line = 0;   // 1-based line where the second document starts; 0 if none
};

// Throws YAML::Exception on malformed YAML, as YAML::LoadAll does; a document that
// makes no progress is malformed too ("unexpected ','").
YamlStream readYamlStream(const std::string& text);

}  // namespace tent::config::detail
