// NotifyLink: one end of an endpoint's notify QP pair (docs/engine.md, "Notifications").
//
// The active end (the endpoint we post transfers on) SENDs notifications; the passive
// end (the target's half) receives them into `credits` posted receive buffers. The
// sender holds one credit per receive buffer it may use: a credit is spent on each
// SEND and comes back when the receiver has copied the message into its inbox and
// posted the buffer again (a credit message, SENT back on the same QP pair, into the
// receive buffers the active end posts for them). So a SEND never finds the receive
// queue empty; receiver-not-ready (kRnrRetryExceeded) remains only as the last guard,
// and when the receiver does not take its messages the sender runs out of credits and
// gets kNoCredit (back-pressure), never a silent drop.
//
// Credit messages need no credits of their own: each returns at least one credit, so
// the ones not yet read by the active end never outnumber the credits it spent, and it
// posts a receive buffer for every credit it may hold.
//
// Posting never waits (notify_link_datapath.cc): post() copies the message into the
// next free slot of a ring of send buffers (one per credit the link may hold), posts
// the SEND and returns. Acknowledgements are reaped later, by the next post(), by a
// caller waiting for its own SEND (sendState()) or when the link retires; a SEND that
// completes in error is counted (Counters::failed) and breaks the link. SENDs of one
// QP complete in order, so a ticket (the SEND's sequence number) says whether it was
// acknowledged. post() only tries the link's mutex: a poster that finds it held gets
// kRetry, so the datapath never waits for another thread; control-path calls lock it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/fabric.h"
#include "notify/notify_inbox.h"
#include "tent/status.h"
#include "wire/bootstrap_notify.h"

namespace tent::notify {

struct Limits {
  uint32_t max_message_bytes = 4096;
  uint32_t credits = 16;
};

enum class Role : uint8_t { kActive = 0, kPassive };

// What post() did. Only kPosted sent anything.
enum class PostResult : uint8_t {
  kPosted = 0,     // the SEND is posted; its acknowledgement is reaped later
  kRetry,          // nothing posted, try again soon: every send buffer awaits its
                   // acknowledgement, another thread holds the link, or (transport)
                   // the endpoint is still connecting
  kNoCredit,       // nothing posted: the receiver holds every buffer (back-pressure)
  kNotSupported,   // the peer's bootstrap offers no notifications (or ours are off)
  kTooLong,        // longer than the peer takes
  kBroken,         // the QP failed: this link sends nothing more
  kUnknownTarget,  // (transport) the segment is not open
  kUnreachable,    // (transport) the segment's endpoint failed or backs off
};

// Where a waited-for SEND stands (sendState()).
enum class SendState : uint8_t { kInFlight = 0, kAcked, kFailed };

class NotifyLink {
 public:
  // kActive: `credits` bounds what it will take from a peer; kPassive: the receive
  // buffers it posts. `sender` (passive) names the peer segment its messages come from.
  // `counters` (may be null) counts SENDs that complete in error after post() returned.
  static Result<std::unique_ptr<NotifyLink>> create(fabric::Device& device, const Limits& limits,
                                                    Role role, Counters* counters,
                                                    std::string sender = "");
  ~NotifyLink();
  NotifyLink(const NotifyLink&) = delete;
  NotifyLink& operator=(const NotifyLink&) = delete;

  // What this end offers in its bootstrap: passive ends the credits and message size.
  metadata::NotifyExtension offer() const;
  // Wires the QP to the peer's notify QP and posts the receive buffers. A peer that
  // offers nothing (`remote` not capable) leaves the link unsupported: post() is
  // kNotSupported and the QP is not wired. `traffic`: how the QP marks its packets (the
  // initiator's qos.control on both ends).
  Status connect(const metadata::NotifyExtension& remote, const fabric::PortIdentity& port,
                 fabric::QpTraffic traffic = {});
  bool supported() const;

  // Active end: posts one notification and returns at once (never waits for the
  // network or for another thread). `ticket`, when given, receives the SEND's sequence
  // number for sendState(). No allocation.
  PostResult post(std::string_view message, uint64_t* ticket = nullptr) noexcept;
  // Active end: whether the SEND of `ticket` was acknowledged by the peer's NIC (reaps
  // what completed). For a caller that waits for its own SEND (control path).
  SendState sendState(uint64_t ticket) noexcept;
  // What a PostResult means, as a Status for an API caller (control path).
  Status explain(PostResult result) const;

  // Passive end: moves arrived notifications into `inbox` while it has room, posts
  // their buffers again and returns the credits. Called with the inbox's mutex held.
  // Returns the notifications moved.
  size_t pollIntoLocked(Inbox& inbox);
  // Passive end, once connected: its inbox polls it from now until it is destroyed.
  void attachTo(Inbox& inbox);
  const std::string& sender() const noexcept { return sender_; }
  Role role() const noexcept { return role_; }

  // QP to ERR (the endpoint is retiring): what completed so far is reaped and counted,
  // SENDs still in flight are flushed, nothing new arrives.
  void quiesce();
  uint32_t qpCount() const noexcept { return qp_ ? 1u : 0u; }

 private:
  NotifyLink(fabric::Device& device, const Limits& limits, Role role, Counters* counters,
             std::string sender);
  Status init();
  bool postRecvSlot(uint32_t slot);
  uint8_t* recvSlot(uint32_t slot) const noexcept;
  uint8_t* sendSlot(uint32_t slot) const noexcept;
  void markBroken(const char* why) noexcept;
  void reapCreditsLocked() noexcept;
  void reapSendsLocked() noexcept;
  PostResult postLocked(std::string_view message, uint64_t* ticket) noexcept;
  bool postSendLocked(uint8_t* slot, uint32_t bytes) noexcept;
  bool sendCreditsLocked() noexcept;

  fabric::Device& device_;
  const Limits limits_;
  const Role role_;
  Counters* const counters_;
  const std::string sender_;
  uint32_t recv_slot_bytes_ = 0;  // passive: a whole message; active: a credit message
  uint32_t send_slot_bytes_ = 0;  // active: a whole message; passive: a credit message
  uint32_t recv_slots_ = 0;       // receive buffers (passive: notifications; active: credits)
  uint32_t send_slots_ = 0;       // the ring of staging buffers of SENDs in flight
  std::unique_ptr<fabric::CompletionQueue> send_cq_;
  std::unique_ptr<fabric::CompletionQueue> recv_cq_;
  std::unique_ptr<fabric::QueuePair> qp_;
  std::vector<uint8_t> memory_;  // recv_slots_ receive buffers, then send_slots_ send buffers
  std::unique_ptr<fabric::MemoryRegion> mr_;

  Inbox* inbox_ = nullptr;
  mutable std::mutex mu_;
  bool wired_ = false;
  bool broken_ = false;
  const char* broken_why_ = "";  // a literal: set on the datapath without allocating
  fabric::WcStatus broken_status_ = fabric::WcStatus::kSuccess;  // the completion that broke it
  bool quiesced_ = false;          // retiring: SENDs flushed from now on are not counted as failed
  uint32_t credits_ = 0;           // active: SENDs the peer has room for
  uint32_t remote_max_bytes_ = 0;  // active: the peer's longest message
  uint32_t uncredited_ = 0;        // passive: buffers posted again, credits not yet sent
  // SENDs (active: notifications; passive: credit messages) by sequence number: posted
  // and reaped (completions arrive in order); the ring slot of SEND n is n % send_slots_.
  uint64_t posted_ = 0;
  uint64_t reaped_ = 0;
  uint64_t first_failed_ = UINT64_MAX;  // the first SEND that completed in error
  bool held_ = false;                   // passive: a message polled that did not fit the inbox
  fabric::WorkCompletion held_wc_;
};

}  // namespace tent::notify
