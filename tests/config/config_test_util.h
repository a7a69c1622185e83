// Helpers shared by the config tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "config/config.h"

namespace tent::config::testing {

// The source tree (meson's test_env sets TENT_TEST_SRCDIR); "" when unset.
inline std::string srcDir() {
  const char* dir = std::getenv("TENT_TEST_SRCDIR");
  return dir != nullptr ? dir : "";
}

inline std::string examplePath(const std::string& name) {
  return srcDir() + "/config/examples/" + name;
}

inline std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses `yaml` as if it were the file "tent.yaml" and returns the error (OK if none).
inline Status parseError(const std::string& yaml) {
  return loadString(yaml, "tent.yaml").status();
}

// A config equal to `c` apart from where it came from.
inline Config withSource(Config c, std::string source) {
  c.source = std::move(source);
  return c;
}

}  // namespace tent::config::testing
