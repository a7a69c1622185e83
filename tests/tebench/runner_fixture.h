// What the runner tests share: a prepared bench engine over the fake engine,
// its "remote" buffer, and flag parsing that fails the test on a bad flag.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "perf/tebench/bench_engine.h"
#include "perf/tebench/bench_options.h"
#include "tests/tebench/fake_engine.h"

namespace tent::bench::testing {

constexpr uint64_t kFixtureBuffer = 1 << 20;

struct Fixture {
  FakeEngine* fake = nullptr;
  std::unique_ptr<BenchEngine> bench;
  RemoteBuffer remote;
};

inline Fixture makeFixture() {
  Fixture f;
  auto engine = std::make_unique<FakeEngine>(kFixtureBuffer);
  f.fake = engine.get();
  auto bench = prepareBenchEngine(std::move(engine), kFixtureBuffer);
  EXPECT_TRUE(bench.ok()) << bench.status().toString();
  f.bench = std::move(bench).value();
  auto remote = openRemoteBuffer(*f.bench->engine, "fake:1", kFixtureBuffer);
  EXPECT_TRUE(remote.ok()) << remote.status().toString();
  f.remote = *remote;
  return f;
}

inline BenchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tebench");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto r = parseBenchOptions(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : BenchOptions{};
}

}  // namespace tent::bench::testing
