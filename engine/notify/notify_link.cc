// NotifyLink, control path: creation, wiring, the passive end's delivery into the inbox,
// a waiting caller's view of its SEND, and retirement. Posting and reaping are in
// notify_link_datapath.cc.
#include "notify/notify_link.h"

#include <algorithm>

#include "notify/notify_inbox.h"
#include "notify/notify_link_internal.h"

namespace tent::notify {

using detail::getHeader;
using detail::kCreditSlotBytes;
using detail::kHeaderBytes;
using detail::kKindNotify;

namespace {
constexpr uint32_t kPassiveSendSlots = 4;  // credit messages in flight
}  // namespace

NotifyLink::NotifyLink(fabric::Device& device, const Limits& limits, Role role, Counters* counters,
                       std::string sender)
    : device_(device),
      limits_(limits),
      role_(role),
      counters_(counters),
      sender_(std::move(sender)) {}

NotifyLink::~NotifyLink() {
  if (inbox_ != nullptr) inbox_->detach(this);  // no pass polls it after this
}

Result<std::unique_ptr<NotifyLink>> NotifyLink::create(fabric::Device& device, const Limits& limits,
                                                       Role role, Counters* counters,
                                                       std::string sender) {
  if (limits.credits == 0 || limits.credits > metadata::kMaxNotifyCredits ||
      limits.max_message_bytes == 0 || limits.max_message_bytes > metadata::kMaxNotifyMessageBytes)
    return Status::InvalidArgument("notify link: credits or message size out of range");
  std::unique_ptr<NotifyLink> link(
      new NotifyLink(device, limits, role, counters, std::move(sender)));
  TENT_RETURN_IF_ERROR(link->init());
  return link;
}

Status NotifyLink::init() {
  const uint32_t message_bytes = (kHeaderBytes + limits_.max_message_bytes + 63) / 64 * 64;
  recv_slots_ = limits_.credits;
  // The active end may have one SEND in flight per credit it can hold; the passive end
  // sends only credit messages.
  send_slots_ = role_ == Role::kActive ? limits_.credits : kPassiveSendSlots;
  recv_slot_bytes_ = role_ == Role::kActive ? kCreditSlotBytes : message_bytes;
  send_slot_bytes_ = role_ == Role::kActive ? message_bytes : kCreditSlotBytes;
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
  memory_.assign(size_t{recv_slot_bytes_} * recv_slots_ + size_t{send_slot_bytes_} * send_slots_,
                 0);
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

bool NotifyLink::postRecvSlot(uint32_t slot) {
  fabric::Sge sge{reinterpret_cast<uint64_t>(recvSlot(slot)), recv_slot_bytes_, mr_->lkey()};
  fabric::RecvWr wr{slot, 1, &sge, nullptr};
  const fabric::RecvWr* bad = nullptr;
  return qp_->postRecv(&wr, &bad) == 0;
}

Status NotifyLink::connect(const metadata::NotifyExtension& remote,
                           const fabric::PortIdentity& port, fabric::QpTraffic traffic) {
  std::lock_guard lock(mu_);
  if (!remote.capable()) {
    qp_.reset();  // the peer takes no notifications: nothing to wire, nothing to hold
    return Status::OK();
  }
  if (!qp_) return Status::FailedPrecondition("notify link already torn down");
  fabric::QpRemote r;
  r.qp_num = remote.qp_num;
  r.port = port;
  r.traffic = traffic;
  TENT_RETURN_IF_ERROR(fabric::connectQp(*qp_, r).withContext("notify QP"));
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
  if (wired_ && !quiesced_) reapSendsLocked();  // outcomes known so far are counted
  quiesced_ = true;
  if (qp_) (void)qp_->modifyToError();
  markBroken("its endpoint is retiring");
}

SendState NotifyLink::sendState(uint64_t ticket) noexcept {
  std::lock_guard lock(mu_);
  if (wired_) reapSendsLocked();
  if (reaped_ <= ticket) return SendState::kInFlight;
  return first_failed_ <= ticket ? SendState::kFailed : SendState::kAcked;
}

Status NotifyLink::explain(PostResult result) const {
  switch (result) {
    case PostResult::kPosted:
      return Status::OK();
    case PostResult::kRetry:
      return Status::ResourceExhausted(
          "every notify send buffer awaits its acknowledgement (or the endpoint is connecting)");
    case PostResult::kNoCredit:
      return Status::ResourceExhausted(
          "the peer's notification receive queue is full (all " + std::to_string(recv_slots_) +
          " credits in use): it has not taken its notifications; retry later");
    case PostResult::kNotSupported:
      return Status::NotSupported("the peer's bootstrap offers no notifications");
    case PostResult::kTooLong:
      return Status::InvalidArgument("notification longer than this peer takes (" +
                                     std::to_string(remote_max_bytes_) + " bytes)");
    case PostResult::kBroken: {
      std::lock_guard lock(mu_);
      std::string why = broken_why_;
      if (broken_status_ != fabric::WcStatus::kSuccess)
        why += std::string(" (") + std::string(toString(broken_status_)) + ")";
      return Status::Unavailable("notify QP failed: " + why);
    }
    case PostResult::kUnknownTarget:
      return Status::NotFound("the segment is not open");
    case PostResult::kUnreachable:
      return Status::Unavailable("the segment is unreachable or backing off");
  }
  return Status::Internal("unknown notify post result");
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
        if (n < 0) markBroken("receive CQ overflow");
        break;
      }
      if (held_wc_.status != fabric::WcStatus::kSuccess) {
        broken_status_ = held_wc_.status;
        markBroken("a receive completed in error");  // flushed: its buffer is not posted again
        continue;
      }
      held_ = true;
    }
    const auto slot = static_cast<uint32_t>(held_wc_.wr_id);
    const uint8_t* p = recvSlot(slot);
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
      markBroken("posting a receive buffer again failed");
      break;
    }
    ++uncredited_;
  }
  sendCreditsLocked();
  return moved;
}

}  // namespace tent::notify
