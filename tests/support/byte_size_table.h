// The size spellings every parser of sizes must agree on (base/byte_size.h): the base
// test, the config test and the flag tests all run this one table.
#pragma once

#include <cstdint>

namespace tent::testing {

struct ByteSizeCase {
  const char* text;
  bool valid;
  uint64_t bytes;  // when valid
};

inline constexpr ByteSizeCase kByteSizeCases[] = {
    {"4096", true, 4096},    {"65536", true, 65536},    {"64k", true, 64 << 10},
    {"64K", true, 64 << 10}, {"64KiB", true, 64 << 10}, {"1m", true, 1 << 20},
    {"1M", true, 1 << 20},   {"1MiB", true, 1 << 20},   {"1g", true, 1 << 30},
    {"1G", true, 1 << 30},   {"1GiB", true, 1 << 30},   {"8k", true, 8 << 10},
    {"64KB", false, 0},                            // 1000 or 1024? not guessed
    {"64kb", false, 0},      {"64kib", false, 0},  // the unit is exactly "iB"
    {"64iB", false, 0},      {"64 k", false, 0},        {"1.5M", false, 0},
    {"-4", false, 0},        {"+4", false, 0},          {"k", false, 0},
    {"", false, 0},          {"12Q", false, 0},         {"0x1000", true, 4096},  // hex counts, as the config's integers
    {"0x10k", false, 0},
    {"0x", false, 0},
};

}  // namespace tent::testing
