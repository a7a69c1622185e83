// The notify QP's message header, shared by the two halves of NotifyLink.
#pragma once

#include <cstdint>
#include <cstring>

namespace tent::notify::detail {

// Every SEND starts with this header: a notification (kind 1, then the message) or a
// credit return (kind 2, value = credits returned, no payload).
inline constexpr uint32_t kKindNotify = 1;
inline constexpr uint32_t kKindCredit = 2;
inline constexpr uint32_t kHeaderBytes = 8;
// A buffer that only ever holds a credit message (the active end's receive buffers,
// the passive end's send buffers): one cache line.
inline constexpr uint32_t kCreditSlotBytes = 64;

inline void putHeader(uint8_t* p, uint32_t kind, uint32_t value) noexcept {
  std::memcpy(p, &kind, 4);
  std::memcpy(p + 4, &value, 4);
}
inline void getHeader(const uint8_t* p, uint32_t* kind, uint32_t* value) noexcept {
  std::memcpy(kind, p, 4);
  std::memcpy(value, p + 4, 4);
}

}  // namespace tent::notify::detail
