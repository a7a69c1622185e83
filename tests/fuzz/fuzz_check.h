// What a fuzz target does when one of its invariants breaks: print what broke and
// abort, which libFuzzer reports as a crash and saves the input as an artifact.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tent/status.h"

// `detail` is a std::string expression, only evaluated when the check fails, so
// the checks cost nothing on the millions of inputs that pass them.
#define FUZZ_CHECK(cond, detail)                                                              \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n%s\n", __FILE__, __LINE__, #cond, \
                   std::string(detail).c_str());                                              \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace tent::fuzz {

// A parser's rejection: InvalidArgument with a message that starts with `prefix`
// and says something after it.
inline void checkRejection(const Status& status, std::string_view prefix) {
  FUZZ_CHECK(!status.ok(), "an error without an error");
  FUZZ_CHECK(status.code() == StatusCode::kInvalidArgument,
             "unexpected status code: " + status.toString());
  const std::string& msg = status.message();
  FUZZ_CHECK(msg.size() > prefix.size() && msg.compare(0, prefix.size(), prefix) == 0,
             "message does not start with '" + std::string(prefix) + "': " + msg);
}

}  // namespace tent::fuzz
