// Counters of the control plane, written on its loop thread, read by stats().
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "wire/control_frames.h"

namespace tent::control {

struct ControlCounters {
  std::atomic<uint64_t> connections_open{0};  // every connection, the loopback session's too
  // The engine's own loopback session's ends among them (stats() reports peers apart).
  std::atomic<uint64_t> loopback_connections_open{0};
  // Control traffic of every connection: bytes on the socket (headers and tags
  // included) and whole frames.
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> frames_received{0};
  std::atomic<uint64_t> frames_sent{0};
  std::atomic<uint64_t> connections_refused{0};
  std::atomic<uint64_t> auth_failures{0};
  std::atomic<uint64_t> frames_rejected{0};
  std::atomic<uint64_t> deadline_closures{0};
  std::atomic<uint64_t> sessions_evicted{0};  // idle sessions closed to make room
  std::atomic<uint64_t> source_cap_hits{0};   // connections from a source at its cap
  // Client sessions that missed io_timeout and stayed up (slow, not down): each time.
  std::atomic<uint64_t> sessions_slow{0};
  // Descriptors fetched from peers' control ports (a session's first request).
  std::atomic<uint64_t> descriptor_fetches{0};

  // Not a counter; loop thread only: the HELLO nonce of the loopback session's client
  // end, by which the server end of that session is told apart from peers' sessions.
  std::optional<metadata::Nonce> loopback_nonce;

  static void bump(std::atomic<uint64_t>& c, int64_t by = 1) noexcept {
    c.fetch_add(static_cast<uint64_t>(by), std::memory_order_relaxed);
  }
};

}  // namespace tent::control
