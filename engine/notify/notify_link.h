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
// gets ResourceExhausted (back-pressure), never a silent drop.
//
// Credit messages need no credits of their own: each returns at least one credit, so
// the ones not yet read by the active end never outnumber the credits it spent, and it
// posts a receive buffer for every credit it may hold.
//
// Every call takes the link's mutex: a notification is a control-path message (it is
// sent once per batch, after the batch completed), not a datapath WR.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"
#include "wire/bootstrap_notify.h"

namespace tent::notify {

class Inbox;

struct Limits {
  uint32_t max_message_bytes = 4096;
  uint32_t credits = 16;
};

enum class Role : uint8_t { kActive = 0, kPassive };

class NotifyLink {
 public:
  // kActive: `credits` bounds what it will take from a peer; kPassive: the receive
  // buffers it posts. `sender` (passive) names the peer segment its messages come from.
  static Result<std::unique_ptr<NotifyLink>> create(fabric::Device& device, const Limits& limits,
                                                    Role role, std::string sender = "");
  ~NotifyLink();
  NotifyLink(const NotifyLink&) = delete;
  NotifyLink& operator=(const NotifyLink&) = delete;

  // What this end offers in its bootstrap: passive ends the credits and message size.
  metadata::NotifyExtension offer() const;
  // Wires the QP to the peer's notify QP and posts the receive buffers. A peer that
  // offers nothing (`remote` not capable) leaves the link unsupported: send() is
  // NotSupported and the QP is not wired.
  Status connect(const metadata::NotifyExtension& remote, const fabric::PortIdentity& port);
  bool supported() const;

  // Active end: one notification, waited for until the receiving NIC acknowledged it
  // (its SEND completed) or `deadline_ns` (engine clock) passed. ResourceExhausted
  // when the receiver holds every buffer (back-pressure; nothing was sent),
  // InvalidArgument for a message longer than the peer takes, Unavailable once the
  // QP failed.
  Status send(std::string_view message, uint64_t deadline_ns);

  // Passive end: moves arrived notifications into `inbox` while it has room, posts
  // their buffers again and returns the credits. Called with the inbox's mutex held.
  // Returns the notifications moved.
  size_t pollIntoLocked(Inbox& inbox);
  // Passive end, once connected: its inbox polls it from now until it is destroyed.
  void attachTo(Inbox& inbox);
  const std::string& sender() const noexcept { return sender_; }
  Role role() const noexcept { return role_; }

  // QP to ERR (the endpoint is retiring): sends in progress fail, nothing new arrives.
  void quiesce();
  uint32_t qpCount() const noexcept { return qp_ ? 1u : 0u; }

 private:
  NotifyLink(fabric::Device& device, const Limits& limits, Role role, std::string sender);
  Status init();
  bool postRecvSlot(uint32_t slot);
  uint8_t* slotAt(uint32_t slot) const noexcept;
  uint32_t sendSlot(uint32_t i) const noexcept { return recv_slots_ + i; }
  void reapCreditsLocked();
  void reapSendsLocked();
  bool sendCreditsLocked();

  fabric::Device& device_;
  const Limits limits_;
  const Role role_;
  const std::string sender_;
  uint32_t slot_bytes_ = 0;
  uint32_t recv_slots_ = 0;  // receive buffers (passive: notifications; active: credits)
  uint32_t send_slots_ = 0;  // staging buffers of SENDs in flight
  std::unique_ptr<fabric::CompletionQueue> send_cq_;
  std::unique_ptr<fabric::CompletionQueue> recv_cq_;
  std::unique_ptr<fabric::QueuePair> qp_;
  std::vector<uint8_t> memory_;  // recv_slots_ + send_slots_ slots
  std::unique_ptr<fabric::MemoryRegion> mr_;

  Inbox* inbox_ = nullptr;
  mutable std::mutex mu_;
  bool wired_ = false;
  bool broken_ = false;
  std::string broken_why_;
  uint32_t credits_ = 0;           // active: SENDs the peer has room for
  uint32_t remote_max_bytes_ = 0;  // active: the peer's longest message
  uint32_t uncredited_ = 0;        // passive: buffers posted again, credits not yet sent
  uint32_t sends_in_flight_ = 0;   // passive: credit messages not yet completed
  uint32_t next_send_slot_ = 0;
  bool held_ = false;  // passive: a message polled that did not fit the inbox
  fabric::WorkCompletion held_wc_;
};

}  // namespace tent::notify
