// This engine in etcd, and its view of the other engines there. On the control loop:
//
//   register  grant a lease (metadata.etcd.lease_ttl_s), put the entry
//             <prefix>segments/<name> on it, refresh the lease every third of the TTL.
//             Any failure: the store is away; retried with exponential backoff and
//             jitter (retry_initial_ms .. retry_max_ms). A lease etcd no longer knows
//             (it expired while we were away, or etcd lost its data) is granted anew
//             and the entry put again.
//   lookup    reads one entry; while the store is away it fails at once (Unavailable):
//             no caller waits on the network, cached segments keep working.
//   watch     every key under <prefix>segments/: a peer's new entry (it restarted) or
//             its removal (lease expired) is handed to the control plane, which
//             re-resolves or marks the segment down before the next request.
// Entries are signed with bootstrap.auth's secret and verified on read (fleet/entry.h);
// one that does not verify is refused and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "config/config.h"
#include "fleet/entry.h"
#include "fleet/etcd_client.h"

namespace tent::fleet {

// Written on the loop, read by stats() from any thread.
struct FleetCounters {
  std::atomic<uint64_t> registrations{0};  // entries put (first, and after the store came back)
  std::atomic<uint64_t> lease_renewals{0};
  std::atomic<uint64_t> store_errors{0};          // requests to etcd that failed on every member
  std::atomic<uint64_t> lookups{0};               // entries read for openSegment
  std::atomic<uint64_t> lookups_refused_away{0};  // failed at once: the store was away
  std::atomic<uint64_t> entries_refused{0};       // entries that did not verify (forged)
  std::atomic<uint64_t> watch_events{0};          // peers' entries changed or removed
  std::atomic<uint64_t> watch_restarts{0};
  std::atomic<uint64_t> peers_readdressed{0};  // open segments re-resolved by a watch event
  std::atomic<uint64_t> peers_expired{0};      // open segments marked down by a watch event
  std::atomic<uint64_t> blobs_added{0};        // addRemoteMetadata: segments opened from a blob
  std::atomic<bool> store_up{false};

  static void bump(std::atomic<uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
};

class Registry {
 public:
  struct PeerEvents {
    std::function<void(const Entry&)> changed;        // a peer put a (verified) entry
    std::function<void(const std::string&)> removed;  // a peer's entry is gone
  };
  // Reads metadata.etcd.password_file (not on the loop).
  static Result<std::unique_ptr<Registry>> create(control::EventLoop& loop,
                                                  const config::MetadataConfig& config,
                                                  const control::Secret& secret,
                                                  FleetCounters& counters);
  ~Registry();

  // ---- loop thread ----
  void start(Entry own, PeerEvents events);
  // Our descriptor changed (memory registered): the entry is put again.
  void updateOwn(std::vector<uint8_t> descriptor);
  void lookup(const std::string& name, std::function<void(Result<Entry>)> done);
  // Revokes our lease (our entry goes with it), answered within request_timeout_ms.
  void stop(std::function<void()> done);
  bool storeUp() const noexcept { return up_; }
  std::string keyOf(const std::string& name) const { return segments_prefix_ + name; }
  HttpClient& http() noexcept { return etcd_->http(); }
  const Entry& own() const noexcept { return own_; }

 private:
  Registry(control::EventLoop& loop, const config::MetadataConfig& config,
           const control::Secret& secret, FleetCounters& counters);
  void grant();
  void putEntry();
  void onRegistered();
  void scheduleKeepAlive();
  void keepAlive();
  void storeAway(const Status& why);
  void startWatch();
  void restartWatchFromNow();
  void onWatch(const WatchMessage& m);
  void setUp(bool up);

  control::EventLoop& loop_;
  const config::MetadataConfig& config_;
  const control::Secret& secret_;
  FleetCounters& counters_;
  std::string segments_prefix_;
  std::unique_ptr<EtcdClient> etcd_;
  Entry own_;
  PeerEvents events_;
  int64_t lease_ = 0;
  bool up_ = false;
  bool stopping_ = false;
  bool registering_ = false;
  bool own_dirty_ = false;  // our descriptor changed while a put was in flight
  uint32_t failures_ = 0;
  std::string last_error_;  // why the store is away: refused lookups say it
  uint64_t timer_ = 0;
  uint64_t watch_ = 0;
  uint64_t watch_timer_ = 0;
  int64_t watch_revision_ = 0;  // last revision seen: a restarted watch goes on from there
  std::mt19937_64 rng_{std::random_device{}()};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tent::fleet
