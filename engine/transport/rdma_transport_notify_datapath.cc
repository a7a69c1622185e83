// Notifications, datapath: a batch's notification is posted from a status poll, so
// posting finds the target's endpoint without waiting (a connect still under way is
// kRetry: the lookup asked the control plane for it) and never waits for the SEND's
// acknowledgement (NotifyLink::post).
#include "base/clock.h"
#include "base/ebr.h"
#include "model/rdma_endpoint.h"
#include "transport/rdma_transport.h"

namespace tent::rdma {

notify::PostResult RdmaTransport::postNotification(SegmentId target, std::string_view message,
                                                   std::shared_ptr<notify::NotifyLink>* link,
                                                   uint64_t* ticket) noexcept {
  using notify::PostResult;
  if (!config_->notify.enabled) return PostResult::kNotSupported;  // ours are off: not counted
  if (message.size() > config_->notify.max_message_bytes) return PostResult::kTooLong;
  PostResult r = PostResult::kRetry;
  {
    ebr::ReadSection section;  // the endpoint stays alive while we post on its link
    RdmaEndPoint* ep = nullptr;
    switch (datapath_->lookup(0, target, 0, clock::engineNowNs(), &ep)) {
      case EndpointLookup::kReady: {
        std::shared_ptr<notify::NotifyLink> found = ep->notifyLink();
        r = found ? found->post(message, ticket) : PostResult::kNotSupported;
        if (link != nullptr) *link = std::move(found);
        break;
      }
      case EndpointLookup::kConnecting:
        return PostResult::kRetry;
      case EndpointLookup::kFailed:
        r = PostResult::kUnreachable;
        break;
      case EndpointLookup::kUnknown:
        return PostResult::kUnknownTarget;
    }
  }
  notify::Counters& n = notify_counters_;
  switch (r) {
    case PostResult::kPosted:
      n.sent.fetch_add(1, std::memory_order_relaxed);
      n.sent_bytes.fetch_add(message.size(), std::memory_order_relaxed);
      break;
    case PostResult::kNoCredit:
      n.refused.fetch_add(1, std::memory_order_relaxed);
      break;
    case PostResult::kNotSupported:
      n.unsupported.fetch_add(1, std::memory_order_relaxed);
      break;
    case PostResult::kBroken:
    case PostResult::kUnreachable:
      n.failed.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      break;  // kRetry: nothing happened yet; kTooLong: the caller's message
  }
  return r;
}

}  // namespace tent::rdma
