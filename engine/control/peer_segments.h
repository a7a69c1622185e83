// Open peer segments on the control plane: per segment one client session and the
// published record (descriptor view + endpoint slots). A session that goes down marks
// the record down (requests fail at once), retires its endpoints and reconnects with
// exponential backoff and jitter; when it is up again a fresh record replaces the
// old one. The local segment is a record fed by our own LocalMemory, with a loopback
// session to our own listener for its bootstraps. Loop thread only.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control/loop_calls.h"
#include "model/segment_table.h"
#include "net/client.h"
#include "tent/transfer_engine.h"

namespace tent::control {

class ControlPlane;

// Exponential backoff with jitter: the n-th consecutive failure waits a random time in
// [d/2, d], d = min(initial x 2^n, max).
uint64_t backoffDelayNs(uint32_t failures, uint32_t initial_ms, uint32_t max_ms,
                        std::mt19937_64& rng) noexcept;

class PeerSegments {
 public:
  using OpenDone = Completer<Result<SegmentId>>;
  explicit PeerSegments(ControlPlane& plane);
  ~PeerSegments();

  // Creates the local segment's record and its loopback session; `up` runs once the
  // session is up (or with the error of its first attempt).
  void startLocal(const std::string& own_name, const SocketAddress& own_address, OpenDone up);
  // `done` is answered once: with the id when the session is up, or with the error.
  // `instance` and `descriptor` (optional): see openKnown.
  void open(const std::string& name, const SocketAddress& address, OpenDone done,
            uint64_t instance = 0, std::vector<uint8_t> descriptor = {});
  // An open whose descriptor is known already (an etcd entry, a metadata blob): the
  // session skips fetching it. `instance` identifies the peer process it came from.
  void openKnown(const std::string& name, const SocketAddress& address, uint64_t instance,
                 std::vector<uint8_t> descriptor, OpenDone done);
  // The id of `name` when it is open and up (nothing to look up).
  std::optional<SegmentId> upId(const std::string& name);
  // A watch saw `name` registered by another instance (the peer restarted, maybe on
  // another port): its endpoints are retired now and the session goes to the new
  // address at once. False when `name` is not open or the instance is the one we have.
  bool readdress(const std::string& name, const SocketAddress& address, uint64_t instance,
                 std::vector<uint8_t> descriptor);
  // A watch saw `name`'s entry go (lease expired, peer closed). A session that is down
  // stops reconnecting to the old address until an entry comes back; one that is up
  // is left alone (the peer answers; its liveness is the session's and the data
  // path's). True when it was stopped.
  bool expire(const std::string& name);
  // Every caller waiting to open `name` gave up (its call timed out or was canceled):
  // a segment that was never up is dropped, as a failed open leaves nothing behind.
  void abandonOpen(const std::string& name);
  Status close(SegmentId id);
  void refresh(SegmentId id, std::function<void(Status)> done);
  void localChanged();
  void closeAll();

  // The session carrying bootstraps to `id`, or nullptr while it is down.
  ClientSession* session(SegmentId id) noexcept;
  // Frees records retired long enough ago (called by the endpoint manager's reclaim).
  void reclaim();
  // Shutdown: frees every retired record and view now (no reader is left).
  void reclaimAll();
  size_t openCount() const noexcept { return peers_.size(); }
  bool busy() const noexcept { return !retired_records_.empty() || !retired_views_.empty(); }

 private:
  struct Peer;
  class SessionListener;
  Peer* find(SegmentId id) noexcept;
  void connect(Peer& p);
  void restartSession(Peer& p);
  void onUp(Peer& p, std::vector<uint8_t> descriptor);
  void onUpdate(Peer& p, std::vector<uint8_t> descriptor);
  void onDown(Peer& p, const Status& why);
  void onSlow(Peer& p, bool slow);
  Status install(Peer& p, std::vector<uint8_t> bytes, bool new_record);
  rdma::SegmentRecord* makeRecord(SegmentId id, uint32_t peer_devices);
  static void inheritSlots(const rdma::SegmentRecord& from, rdma::SegmentRecord& to);
  void setView(rdma::SegmentRecord& rec, std::shared_ptr<const rdma::PeerSegment> peer);
  void retireRecord(rdma::SegmentRecord* rec);
  void drop(Peer& p);
  void installLocal();

  ControlPlane& plane_;
  std::map<SegmentId, std::unique_ptr<Peer>> peers_;
  std::map<std::string, SegmentId> by_name_;
  std::vector<std::pair<rdma::SegmentRecord*, uint64_t>> retired_records_;  // (record, epoch)
  std::vector<std::pair<const rdma::SegmentView*, uint64_t>> retired_views_;
  std::vector<uint32_t> next_owner_;  // per context: round-robin over background pollers
  std::mt19937_64 rng_;
};

}  // namespace tent::control
