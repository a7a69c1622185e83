// NotifyLink, datapath: posting a notification into the ring of send buffers, reaping
// acknowledgements and returned credits, and the passive end's credit messages. No
// allocation, no waiting: post() only tries the link's mutex (a caller that holds it
// does not wait for the network either), and a SEND's acknowledgement is reaped later.
#include <algorithm>
#include <cstring>

#include "notify/notify_link.h"
#include "notify/notify_link_internal.h"

namespace tent::notify {

using detail::getHeader;
using detail::kHeaderBytes;
using detail::kKindCredit;
using detail::kKindNotify;
using detail::putHeader;

uint8_t* NotifyLink::recvSlot(uint32_t slot) const noexcept {
  return const_cast<uint8_t*>(memory_.data()) + size_t{slot} * recv_slot_bytes_;
}

uint8_t* NotifyLink::sendSlot(uint32_t slot) const noexcept {
  return const_cast<uint8_t*>(memory_.data()) + size_t{recv_slot_bytes_} * recv_slots_ +
         size_t{slot} * send_slot_bytes_;
}

void NotifyLink::markBroken(const char* why) noexcept {
  if (!broken_) broken_why_ = why;
  broken_ = true;
}

void NotifyLink::reapCreditsLocked() noexcept {
  fabric::WorkCompletion wc[16];
  int n;
  while ((n = recv_cq_->poll(wc, 16)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != fabric::WcStatus::kSuccess) {
        if (!broken_) broken_status_ = wc[i].status;
        markBroken("a credit receive completed in error");
        continue;
      }
      const auto slot = static_cast<uint32_t>(wc[i].wr_id);
      uint32_t kind = 0, value = 0;
      if (wc[i].byte_len >= kHeaderBytes) getHeader(recvSlot(slot), &kind, &value);
      if (kind == kKindCredit) credits_ = std::min(credits_ + value, recv_slots_);
      fabric::Sge sge{reinterpret_cast<uint64_t>(recvSlot(slot)), recv_slot_bytes_, mr_->lkey()};
      fabric::RecvWr wr{slot, 1, &sge, nullptr};
      const fabric::RecvWr* bad = nullptr;
      if (qp_->postRecv(&wr, &bad) != 0) markBroken("posting a credit receive buffer failed");
    }
  }
  if (n < 0) markBroken("credit CQ overflow");
}

void NotifyLink::reapSendsLocked() noexcept {
  fabric::WorkCompletion wc[16];
  int n;
  while ((n = send_cq_->poll(wc, 16)) > 0) {
    for (int i = 0; i < n; ++i, ++reaped_) {
      if (wc[i].status == fabric::WcStatus::kSuccess) continue;
      if (first_failed_ == UINT64_MAX) first_failed_ = reaped_;
      // A notification that was posted and not delivered: counted here, once, whoever
      // reaps it. Flushes of a retiring link are not failures of the channel.
      if (role_ == Role::kActive && !quiesced_ && counters_ != nullptr)
        counters_->failed.fetch_add(1, std::memory_order_relaxed);
      if (!broken_) broken_status_ = wc[i].status;
      markBroken(role_ == Role::kActive ? "a notification SEND completed in error"
                                        : "a credit SEND completed in error");
    }
  }
  if (n < 0) markBroken("send CQ overflow");
}

bool NotifyLink::postSendLocked(uint8_t* slot, uint32_t bytes) noexcept {
  fabric::Sge sge{reinterpret_cast<uint64_t>(slot), bytes, mr_->lkey()};
  fabric::SendWr wr;
  wr.wr_id = posted_;
  wr.opcode = fabric::WrOpcode::kSend;
  wr.num_sge = 1;
  wr.sg_list = &sge;
  const fabric::SendWr* bad = nullptr;
  if (qp_->postSend(&wr, &bad) != 0) {
    markBroken("posting a SEND failed");
    return false;
  }
  ++posted_;
  return true;
}

PostResult NotifyLink::post(std::string_view message, uint64_t* ticket) noexcept {
  if (!mu_.try_lock()) return PostResult::kRetry;  // another poster or a control call: soon
  const PostResult r = postLocked(message, ticket);
  mu_.unlock();
  return r;
}

PostResult NotifyLink::postLocked(std::string_view message, uint64_t* ticket) noexcept {
  if (!wired_ || role_ != Role::kActive) return PostResult::kNotSupported;
  if (message.size() > remote_max_bytes_) return PostResult::kTooLong;
  reapSendsLocked();
  reapCreditsLocked();
  if (broken_) return PostResult::kBroken;
  if (credits_ == 0) return PostResult::kNoCredit;
  // Every send buffer holds a SEND not yet acknowledged (its credit already came back).
  if (posted_ - reaped_ >= send_slots_) return PostResult::kRetry;
  uint8_t* p = sendSlot(static_cast<uint32_t>(posted_ % send_slots_));
  putHeader(p, kKindNotify, static_cast<uint32_t>(message.size()));
  std::memcpy(p + kHeaderBytes, message.data(), message.size());
  const uint64_t seq = posted_;
  if (!postSendLocked(p, static_cast<uint32_t>(kHeaderBytes + message.size())))
    return PostResult::kBroken;
  --credits_;
  if (ticket != nullptr) *ticket = seq;
  return PostResult::kPosted;
}

bool NotifyLink::sendCreditsLocked() noexcept {
  if (uncredited_ == 0 || broken_ || posted_ - reaped_ >= send_slots_) return false;
  uint8_t* p = sendSlot(static_cast<uint32_t>(posted_ % send_slots_));
  putHeader(p, kKindCredit, uncredited_);
  if (!postSendLocked(p, kHeaderBytes)) return false;
  uncredited_ = 0;
  return true;
}

}  // namespace tent::notify
