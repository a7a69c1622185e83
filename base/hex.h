// Addresses in messages: one spelling ("0x7f..."), one helper, for every floor.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tent {

inline std::string hexAddr(uint64_t addr) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
  return buf;
}

}  // namespace tent
