#include "wire/bootstrap_notify.h"

#include <string>

#include "wire/wire.h"

namespace tent::metadata {

std::vector<uint8_t> encodeNotifyExtension(const NotifyExtension& n) {
  WireWriter w;
  w.u32(n.flags);
  w.u32(n.qp_num);
  w.u32(n.credits);
  w.u32(n.max_message_bytes);
  return std::move(w.bytes());
}

Result<NotifyExtension> parseNotifyExtension(std::span<const uint8_t> bytes) {
  auto bad = [](const char* what) {
    return Status::InvalidArgument(std::string("malformed notify extension: ") + what);
  };
  if (bytes.size() != kNotifyExtensionBytes) return bad("length is not 16 bytes");
  WireReader r(bytes.data(), bytes.size());
  NotifyExtension n;
  r.u32(&n.flags);
  r.u32(&n.qp_num);
  r.u32(&n.credits);
  r.u32(&n.max_message_bytes);
  if ((n.flags & kNotifyCapable) == 0) return n;  // offers nothing; the rest is not read
  if (n.qp_num == 0) return bad("capable without a notify QP");
  if (n.credits == 0 || n.credits > kMaxNotifyCredits) return bad("credits out of [1, 1024]");
  if (n.max_message_bytes == 0 || n.max_message_bytes > kMaxNotifyMessageBytes)
    return bad("max_message_bytes out of [1, 1048576]");
  return n;
}

void putNotifyExtension(BootstrapMessage* msg, const NotifyExtension& n) {
  if (n.capable()) msg->setExtension(BootstrapTag::kNotify, encodeNotifyExtension(n));
}

Result<NotifyExtension> notifyExtensionOf(const BootstrapMessage& msg) {
  // A v2 bootstrap (or a v3 one without the tag) offers nothing: an older peer.
  const std::vector<uint8_t>* bytes = msg.extension(BootstrapTag::kNotify);
  if (bytes == nullptr) return NotifyExtension{};
  return parseNotifyExtension(*bytes);
}

}  // namespace tent::metadata
