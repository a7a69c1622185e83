// LoopCalls: every call an API thread makes into the control loop completes exactly
// once - answered, failed, timed out or canceled - whatever the loop does with it
// (answers late, loses it, is stalled, or is shutting down).
#include "control/loop_calls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace tent::control {
namespace {

using IdResult = Result<uint64_t>;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kLong = 60'000 * kMs;  // a bound nothing in these tests reaches

struct Loop {
  Loop() : loop(std::move(EventLoop::create()).value()), calls(*loop) { loop->start("test-loop"); }
  ~Loop() {
    loop->stop();
    loop->join();
  }
  // Runs `fn` on the loop and waits for it (a test helper, not under test).
  template <typename Fn>
  void onLoop(Fn fn) {
    std::promise<void> done;
    loop->post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  std::unique_ptr<EventLoop> loop;
  LoopCalls calls;
};

// Blocks the loop thread until released: a stalled control thread, without timing.
struct Stall {
  explicit Stall(EventLoop& loop) {
    loop.post([f = release.get_future().share(), this]() mutable {
      entered.set_value();
      f.wait();
    });
    entered.get_future().wait();
  }
  ~Stall() { free(); }
  void free() {
    if (!freed) release.set_value();
    freed = true;
  }
  std::promise<void> release, entered;
  bool freed = false;
};

TEST(LoopCalls, AnAnswerCompletesTheCall) {
  Loop l;
  IdResult r = l.calls.run<IdResult>(kLong, "answer", "test",
                                     [](Completer<IdResult> done) { done(IdResult(7)); });
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(*r, 7u);
  Status s = l.calls.run<Status>(kLong, "fail", "test", [](Completer<Status> done) {
    done(Status::Unavailable("peer down"));
  });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(l.calls.openCalls(), 0u);
}

TEST(LoopCalls, ALostCompletionTimesOutInsteadOfHanging) {
  Loop l;
  std::atomic<int> cleanups{0};
  IdResult r = l.calls.run<IdResult>(
      50 * kMs, "open segment x", "test.budget_ms",
      [](Completer<IdResult>) { /* the completer is dropped: nobody will answer */ },
      [&] { ++cleanups; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("open segment x"), std::string::npos);
  EXPECT_NE(r.status().message().find("test.budget_ms"), std::string::npos);
  // The loop's own deadline timer runs the cleanup and forgets the call.
  std::atomic<bool> settled{false};
  while (!settled.load()) l.onLoop([&] { settled = l.calls.openCalls() == 0 && cleanups == 1; });
  EXPECT_EQ(cleanups.load(), 1);
}

TEST(LoopCalls, ALateAnswerIsDropped) {
  Loop l;
  Completer<IdResult> kept;
  std::atomic<int> cleanups{0};
  IdResult r = l.calls.run<IdResult>(
      20 * kMs, "late", "test", [&](Completer<IdResult> done) { kept = done; },
      [&] { ++cleanups; });
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  l.onLoop([&] {
    EXPECT_TRUE(kept.abandoned());
    kept(IdResult(1));  // after the deadline: dropped, completes nothing twice
  });
  std::atomic<bool> settled{false};
  while (!settled.load()) l.onLoop([&] { settled = l.calls.openCalls() == 0; });
  EXPECT_EQ(cleanups.load(), 1);
}

TEST(LoopCalls, AStalledLoopCannotHoldTheCaller) {
  Loop l;
  std::atomic<bool> ran{false};
  Status s;
  {
    Stall stall(*l.loop);
    s = l.calls.run<Status>(20 * kMs, "close segment 3", "bootstrap.io_timeout_ms",
                            [&](Completer<Status> done) {
                              ran = true;
                              done(Status::OK());
                            });
    EXPECT_FALSE(ran.load());  // the loop has not run it yet
  }
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
  // The work still runs once the loop resumes (a close or a republish must happen).
  std::atomic<bool> settled{false};
  while (!settled.load()) l.onLoop([&] { settled = ran.load() && l.calls.openCalls() == 0; });
}

TEST(LoopCalls, AbortCompletesCallsInProgressAndRefusesLaterOnes) {
  Loop l;
  std::vector<Completer<IdResult>> kept;
  std::atomic<int> started{0};
  std::vector<std::future<IdResult>> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] {
      return l.calls.run<IdResult>(kLong, "open", "test", [&](Completer<IdResult> done) {
        kept.push_back(done);
        ++started;
      });
    }));
  }
  while (started.load() < 4) std::this_thread::yield();
  l.calls.abortAll(Status::Canceled("the engine is closing"));
  for (auto& w : waiting) {
    IdResult r = w.get();
    EXPECT_EQ(r.status().code(), StatusCode::kCanceled) << r.status().toString();
  }
  std::atomic<bool> ran{false};
  IdResult later = l.calls.run<IdResult>(kLong, "open", "test", [&](Completer<IdResult> done) {
    ran = true;
    done(IdResult(1));
  });
  EXPECT_EQ(later.status().code(), StatusCode::kCanceled);
  l.onLoop([&] {
    for (auto& k : kept) k(IdResult(2));  // dropped
  });
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(l.calls.openCalls(), 0u);
}

TEST(LoopCalls, WorkOfAnAbortedCallNeverRuns) {
  Loop l;
  std::atomic<bool> ran{false};
  std::future<Status> call;
  {
    Stall stall(*l.loop);
    call = std::async(std::launch::async, [&] {
      return l.calls.run<Status>(kLong, "open", "test", [&](Completer<Status> done) {
        ran = true;
        done(Status::OK());
      });
    });
    while (l.calls.openCalls() == 0) std::this_thread::yield();
    l.calls.abortAll(Status::Canceled("closing"));
    EXPECT_EQ(call.get().code(), StatusCode::kCanceled);
  }
  l.onLoop([] {});  // the posted work has had its turn
  EXPECT_FALSE(ran.load());
}

TEST(LoopCalls, EachCallCompletesExactlyOnceUnderRaces) {
  // Answer, deadline and abort race on many calls; each wins at most once.
  detail::TypedCall<Status> call;
  std::atomic<int> wins{0};
  std::vector<std::thread> racers;
  for (int t = 0; t < 4; ++t)
    racers.emplace_back([&, t] {
      if (call.complete(t == 0 ? Status::OK() : Status::Timeout("t"))) ++wins;
    });
  for (auto& r : racers) r.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_FALSE(call.fail(Status::Canceled("late")));
}

}  // namespace
}  // namespace tent::control
