// One rule for byte sizes, shared by every command-line flag and the config
// (docs/config.md, "Value syntax"): a decimal count of bytes, optionally followed by a
// binary unit, or a hex count (0x10000, no unit, as the config's integers). The unit is
// one letter, k, m, g or t in either case, optionally followed by "iB" (so 64k, 64K and
// 64KiB are all 65536); every unit is a power of 1024. Nothing else is accepted: no
// spaces, no fractions, no sign, and no "KB"/"MB" (whether those mean 1000 or 1024
// differs between tools, so neither is guessed).
#pragma once

#include <cstdint>
#include <string_view>

#include "tent/status.h"

namespace tent {

// The bytes `text` names; InvalidArgument naming the rule, or OutOfRange past 2^63 - 1.
Result<uint64_t> parseByteSize(std::string_view text);

// The rule in one line, for error messages and --help texts.
inline constexpr std::string_view kByteSizeRule =
    "bytes, optionally with a binary unit: k, m, g, t (either case, optionally followed by "
    "iB; powers of 1024)";

}  // namespace tent
