// metrics.listen at config load: off (empty) by default; host:port like bootstrap.listen
// or empty; anything else refused naming the file, line, key and what is allowed.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace tent::config {
namespace {

Status load(const std::string& yaml) {
  return loadString(yaml, "tent.yaml").status();
}

TEST(MetricsConfig, OffByDefault) {
  EXPECT_EQ(defaults()->metrics.listen, "");
  auto c = loadString("metrics: {}\n");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ((*c)->metrics.listen, "");
}

TEST(MetricsConfig, AcceptsHostPortAndEmpty) {
  for (const char* listen :
       {"", "127.0.0.1:9464", "0.0.0.0:0", "node-7.example:65535", "[::1]:9464", "[::]:9464"}) {
    auto c =
        loadString("eal: {mode: manual}\nmetrics:\n  listen: \"" + std::string(listen) + "\"\n");
    ASSERT_TRUE(c.ok()) << listen << ": " << c.status().toString();
    EXPECT_EQ((*c)->metrics.listen, listen);
  }
}

TEST(MetricsConfig, RefusesWhatIsNotHostPort) {
  for (const char* listen : {"9464", "127.0.0.1", "127.0.0.1:", ":9464", "host:70000", "host:-1",
                             "::1:9464", "h st:1", "host:80x", "[::1]", "http://h:1"}) {
    SCOPED_TRACE(listen);
    const Status s = load("eal: {mode: manual}\n# the endpoint\nmetrics:\n  listen: \"" +
                          std::string(listen) + "\"\n");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("tent.yaml:4: metrics.listen: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("host:port with a port in [0, 65535] (IPv6 as [addr]:port), or "
                               "empty for off"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("got '" + std::string(listen) + "'"), std::string::npos)
        << s.message();
  }
}

TEST(MetricsConfig, WrongShapesAndUnknownKeys) {
  Status s = load("metrics:\n  listen: [a]\n");
  EXPECT_EQ(s.message().rfind("tent.yaml:2: metrics.listen: ", 0), 0u) << s.message();
  s = load("metrics:\n  port: 9464\n");
  EXPECT_EQ(s.message().rfind("tent.yaml:2: metrics.port: unknown key", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("listen"), std::string::npos) << s.message();
}

TEST(MetricsConfig, RoundTripsThroughYaml) {
  auto c = loadString("metrics: {listen: \"127.0.0.1:9464\"}\n");
  ASSERT_TRUE(c.ok());
  auto back = loadString(toYaml(**c));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ((*back)->metrics, (*c)->metrics);
}

}  // namespace
}  // namespace tent::config
