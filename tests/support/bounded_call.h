// Runs an API call on a thread of its own and waits for it with a bound, so that a
// call that never returns fails its test instead of hanging the suite. The bound is
// a guard against a hang, never a speed requirement: keep it generous.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>

namespace tent::testing {

// The call's result, or nullopt when it had not returned after `seconds`. A call that
// did not return keeps its thread (detached) and whatever it captured by reference:
// the caller must then leak those objects (the test has failed anyway).
template <typename Fn>
auto boundedCall(Fn fn, double seconds) -> std::optional<decltype(fn())> {
  using R = decltype(fn());
  auto promise = std::make_shared<std::promise<R>>();
  auto future = promise->get_future();
  std::thread([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); }).detach();
  if (future.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready)
    return std::nullopt;
  return future.get();
}

}  // namespace tent::testing
