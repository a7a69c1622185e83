// The notify channel's bootstrap extension (BootstrapTag::kNotify): what one side of an
// endpoint offers for notifications (docs/engine.md, "Notifications").
//   flags u32 | notify_qp_num u32 | credits u32 | max_message_bytes u32
// A bootstrap without it (an older peer, v2 or below) offers none: a notification to
// that peer is NotSupported and transfers keep working.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tent/status.h"
#include "wire/bootstrap.h"

namespace tent::metadata {

inline constexpr uint32_t kNotifyCapable = 1u << 0;  // the sender takes notifications
inline constexpr size_t kNotifyExtensionBytes = 16;
inline constexpr uint32_t kMaxNotifyCredits = 1024;
inline constexpr uint32_t kMaxNotifyMessageBytes = 1u << 20;

struct NotifyExtension {
  uint32_t flags = 0;
  uint32_t qp_num = 0;             // the sender's notify QP
  uint32_t credits = 0;            // receive buffers it posted for notifications
  uint32_t max_message_bytes = 0;  // the longest notification each of them takes

  bool capable() const noexcept { return (flags & kNotifyCapable) != 0 && qp_num != 0; }
  bool operator==(const NotifyExtension&) const = default;
};

std::vector<uint8_t> encodeNotifyExtension(const NotifyExtension& n);
// InvalidArgument for a wrong length, a capable extension without a QP, credits or a
// message size out of range. Unknown flag bits are ignored (later versions add some).
Result<NotifyExtension> parseNotifyExtension(std::span<const uint8_t> bytes);

// The kNotify extension in a bootstrap: set (a capable one only) and read (one that
// offers nothing when the bootstrap has none: an older peer). A malformed extension
// is InvalidArgument.
void putNotifyExtension(BootstrapMessage* msg, const NotifyExtension& n);
Result<NotifyExtension> notifyExtensionOf(const BootstrapMessage& msg);

}  // namespace tent::metadata
