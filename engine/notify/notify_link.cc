#include "notify/notify_link.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/clock.h"
#include "notify/notify_inbox.h"

namespace tent::notify {

namespace {
// Every SEND starts with this header: a notification (kind 1, then the message) or a
// credit return (kind 2, value = credits returned, no payload).
constexpr uint32_t kKindNotify = 1;
constexpr uint32_t kKindCredit = 2;
constexpr uint32_t kHeaderBytes = 8;
constexpr uint32_t kPassiveSendSlots = 4;  // credit messages in flight

void putHeader(uint8_t* p, uint32_t kind, uint32_t value) {
  std::memcpy(p, &kind, 4);
  std::memcpy(p + 4, &value, 4);
}
void getHeader(const uint8_t* p, uint32_t* kind, uint32_t* value) {
  std::memcpy(kind, p, 4);
  std::memcpy(value, p + 4, 4);
}
}  // namespace

NotifyLink::NotifyLink(fabric::Device& device, const Limits& limits, Role role, std::string sender)
    : device_(device), limits_(limits), role_(role), sender_(std::move(sender)) {}

NotifyLink::~NotifyLink() {
  if (inbox_ != nullptr) inbox_->detach(this);  // no pass polls it after this
}

Result<std::unique_ptr<NotifyLink>> NotifyLink::create(fabric::Device& device, const Limits& limits,
                                                       Role role, std::string sender) {
  if (limits.credits == 0 || limits.credits > metadata::kMaxNotifyCredits ||
      limits.max_message_bytes == 0 || limits.max_message_bytes > metadata::kMaxNotifyMessageBytes)
    return Status::InvalidArgument("notify link: credits or message size out of range");
  std::unique_ptr<NotifyLink> link(new NotifyLink(device, limits, role, std::move(sender)));
  TENT_RETURN_IF_ERROR(link->init());
  return link;
}

Status NotifyLink::init() {
  recv_slots_ = limits_.credits;
  send_slots_ = role_ == Role::kActive ? 1 : kPassiveSendSlots;
  slot_bytes_ = (kHeaderBytes + limits_.max_message_bytes + 63) / 64 * 64;
  auto scq = device_.createCq(send_slots_ + 2);
  if (!scq.ok()) return scq.status().withContext("notify send CQ");
  send_cq_ = std::move(scq).value();
  auto rcq = device_.createCq(recv_slots_ + 2);
  if (!rcq.ok()) return rcq.status().withContext("notify receive CQ");
  recv_cq_ = std::move(rcq).value();
  fabric::QpInitAttr attr;
  attr.send_cq = send_cq_.get();
  attr.max_send_wr = send_slots_;
  attr.max_sge = 1;
  attr.recv_cq = recv_cq_.get();
  attr.max_recv_wr = recv_slots_;
  auto qp = device_.createQp(attr);
  if (!qp.ok()) return qp.status().withContext("notify QP");
  qp_ = std::move(qp).value();
  memory_.assign(size_t{slot_bytes_} * (recv_slots_ + send_slots_), 0);
  auto mr = device_.registerMemory(memory_.data(), memory_.size(), fabric::kAccessLocalWrite);
  if (!mr.ok()) return mr.status().withContext("notify buffers");
  mr_ = std::move(mr).value();
  return Status::OK();
}

metadata::NotifyExtension NotifyLink::offer() const {
  metadata::NotifyExtension n;
  if (!qp_) return n;
  n.flags = metadata::kNotifyCapable;
  n.qp_num = qp_->qpNum();
  n.credits = recv_slots_;
  n.max_message_bytes = limits_.max_message_bytes;
  return n;
}

uint8_t* NotifyLink::slotAt(uint32_t slot) const noexcept {
  return const_cast<uint8_t*>(memory_.data()) + size_t{slot} * slot_bytes_;
}

bool NotifyLink::postRecvSlot(uint32_t slot) {
  fabric::Sge sge{reinterpret_cast<uint64_t>(slotAt(slot)), slot_bytes_, mr_->lkey()};
  fabric::RecvWr wr{slot, 1, &sge, nullptr};
  const fabric::RecvWr* bad = nullptr;
  return qp_->postRecv(&wr, &bad) == 0;
}

Status NotifyLink::connect(const metadata::NotifyExtension& remote,
                           const fabric::PortIdentity& port) {
  std::lock_guard lock(mu_);
  if (!remote.capable()) {
    qp_.reset();  // the peer takes no notifications: nothing to wire, nothing to hold
    return Status::OK();
  }
  if (!qp_) return Status::FailedPrecondition("notify link already torn down");
  TENT_RETURN_IF_ERROR(fabric::connectQp(*qp_, {remote.qp_num, port, 0}).withContext("notify QP"));
  for (uint32_t i = 0; i < recv_slots_; ++i)
    if (!postRecvSlot(i)) return Status::Internal("notify QP: posting a receive buffer failed");
  if (role_ == Role::kActive) {
    // Never more credits than receive buffers for their return (see the header).
    credits_ = std::min(remote.credits, recv_slots_);
    remote_max_bytes_ = std::min(remote.max_message_bytes, limits_.max_message_bytes);
  }
  wired_ = true;
  return Status::OK();
}

bool NotifyLink::supported() const {
  std::lock_guard lock(mu_);
  return wired_;
}

void NotifyLink::attachTo(Inbox& inbox) {
  inbox_ = &inbox;
  inbox.attach(this);
}

void NotifyLink::quiesce() {
  std::lock_guard lock(mu_);
  if (qp_) (void)qp_->modifyToError();
  if (!broken_) broken_why_ = "its endpoint is retiring";
  broken_ = true;
}

void NotifyLink::reapCreditsLocked() {
  fabric::WorkCompletion wc[16];
  int n;
  while ((n = recv_cq_->poll(wc, 16)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != fabric::WcStatus::kSuccess) {
        if (!broken_) broken_why_ = "credit receive " + std::string(toString(wc[i].status));
        broken_ = true;
        continue;
      }
      uint32_t kind = 0, value = 0;
      if (wc[i].byte_len >= kHeaderBytes)
        getHeader(slotAt(static_cast<uint32_t>(wc[i].wr_id)), &kind, &value);
      if (kind == kKindCredit) credits_ = std::min(credits_ + value, recv_slots_);
      if (!postRecvSlot(static_cast<uint32_t>(wc[i].wr_id))) broken_ = true;
    }
  }
  if (n < 0) broken_ = true;
}

Status NotifyLink::send(std::string_view message, uint64_t deadline_ns) {
  std::lock_guard lock(mu_);
  if (!wired_) return Status::NotSupported("the peer's bootstrap offers no notifications");
  if (message.size() > remote_max_bytes_)
    return Status::InvalidArgument("notification of " + std::to_string(message.size()) +
                                   " bytes; this peer takes at most " +
                                   std::to_string(remote_max_bytes_));
  reapCreditsLocked();
  if (broken_) return Status::Unavailable("notify QP failed: " + broken_why_);
  if (credits_ == 0)
    return Status::ResourceExhausted(
        "the peer's notification receive queue is full (all " + std::to_string(recv_slots_) +
        " credits in use): it has not taken its notifications; retry later");
  uint8_t* p = slotAt(sendSlot(0));
  putHeader(p, kKindNotify, static_cast<uint32_t>(message.size()));
  std::memcpy(p + kHeaderBytes, message.data(), message.size());
  fabric::Sge sge{reinterpret_cast<uint64_t>(p),
                  static_cast<uint32_t>(kHeaderBytes + message.size()), mr_->lkey()};
  fabric::SendWr wr;
  wr.wr_id = 1;
  wr.opcode = fabric::WrOpcode::kSend;
  wr.num_sge = 1;
  wr.sg_list = &sge;
  const fabric::SendWr* bad = nullptr;
  if (int rc = qp_->postSend(&wr, &bad); rc != 0) {
    broken_ = true;
    broken_why_ = "posting the SEND failed (errno " + std::to_string(rc) + ")";
    return Status::Unavailable("notify QP: " + broken_why_);
  }
  --credits_;
  // Wait for the receiving NIC's acknowledgement: the message is in a receive buffer.
  for (uint32_t spins = 0;; ++spins) {
    fabric::WorkCompletion wc;
    const int n = send_cq_->poll(&wc, 1);
    if (n == 1) {
      if (wc.status == fabric::WcStatus::kSuccess) return Status::OK();
      broken_ = true;
      broken_why_ = "SEND completed " + std::string(toString(wc.status));
      return Status::Unavailable("notify QP: " + broken_why_);
    }
    if (n < 0 || clock::engineNowNs() >= deadline_ns) {
      broken_ = true;  // the SEND may still be posted: this link sends nothing more
      broken_why_ = n < 0 ? "send CQ overflow" : "a SEND was not acknowledged in time";
      return n < 0 ? Status::Unavailable("notify QP: " + broken_why_)
                   : Status::Timeout("notification not acknowledged by the peer's NIC in time");
    }
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void NotifyLink::reapSendsLocked() {
  fabric::WorkCompletion wc[8];
  int n;
  while ((n = send_cq_->poll(wc, 8)) > 0) {
    for (int i = 0; i < n; ++i) {
      --sends_in_flight_;
      if (wc[i].status != fabric::WcStatus::kSuccess) {
        if (!broken_) broken_why_ = "credit SEND " + std::string(toString(wc[i].status));
        broken_ = true;
      }
    }
  }
  if (n < 0) broken_ = true;
}

bool NotifyLink::sendCreditsLocked() {
  if (uncredited_ == 0 || broken_ || sends_in_flight_ == send_slots_) return false;
  uint8_t* p = slotAt(sendSlot(next_send_slot_));
  next_send_slot_ = (next_send_slot_ + 1) % send_slots_;
  putHeader(p, kKindCredit, uncredited_);
  fabric::Sge sge{reinterpret_cast<uint64_t>(p), kHeaderBytes, mr_->lkey()};
  fabric::SendWr wr;
  wr.wr_id = 2;
  wr.opcode = fabric::WrOpcode::kSend;
  wr.num_sge = 1;
  wr.sg_list = &sge;
  const fabric::SendWr* bad = nullptr;
  if (qp_->postSend(&wr, &bad) != 0) {
    broken_ = true;
    broken_why_ = "posting a credit SEND failed";
    return false;
  }
  ++sends_in_flight_;
  uncredited_ = 0;
  return true;
}

size_t NotifyLink::pollIntoLocked(Inbox& inbox) {
  std::lock_guard lock(mu_);
  if (!wired_ || role_ != Role::kPassive) return 0;
  reapSendsLocked();
  size_t moved = 0;
  for (;;) {
    if (!held_) {
      const int n = recv_cq_->poll(&held_wc_, 1);
      if (n <= 0) {
        if (n < 0) broken_ = true;
        break;
      }
      if (held_wc_.status != fabric::WcStatus::kSuccess) {
        if (!broken_) broken_why_ = "receive " + std::string(toString(held_wc_.status));
        broken_ = true;  // flushed: the QP is in ERR, its buffers are not posted again
        continue;
      }
      held_ = true;
    }
    const auto slot = static_cast<uint32_t>(held_wc_.wr_id);
    const uint8_t* p = slotAt(slot);
    uint32_t kind = 0, value = 0;
    if (held_wc_.byte_len >= kHeaderBytes) getHeader(p, &kind, &value);
    const size_t length = held_wc_.byte_len >= kHeaderBytes ? held_wc_.byte_len - kHeaderBytes : 0;
    if (kind == kKindNotify) {
      if (!inbox.hasRoomLocked(length)) break;  // stays in its buffer: the sender waits
      inbox.pushLocked(sender_, p + kHeaderBytes, length);
      ++moved;
    }
    held_ = false;
    if (!postRecvSlot(slot)) {
      broken_ = true;
      break;
    }
    ++uncredited_;
  }
  sendCreditsLocked();
  return moved;
}

}  // namespace tent::notify
