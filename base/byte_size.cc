#include "base/byte_size.h"

#include <charconv>
#include <limits>
#include <string>

namespace tent {
namespace {

// log2 of the unit's multiple; -1: not a unit letter.
int unitShift(char c) {
  switch (c) {
    case 'k':
    case 'K':
      return 10;
    case 'm':
    case 'M':
      return 20;
    case 'g':
    case 'G':
      return 30;
    case 't':
    case 'T':
      return 40;
    default:
      return -1;
  }
}

Status invalid(std::string_view text) {
  return Status::InvalidArgument("'" + std::string(text) + "' is not a size: expected " +
                                 std::string(kByteSizeRule) + ", e.g. 4096, 64k, 1MiB");
}

}  // namespace

Result<uint64_t> parseByteSize(std::string_view text) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    // Hex, as the config's integers: a count of bytes, no unit.
    uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), v, 16);
    if (ptr != text.data() + text.size()) return invalid(text);
    if (ec == std::errc::result_out_of_range || v > kMax)
      return Status::OutOfRange("size '" + std::string(text) + "' is larger than 2^63 - 1 bytes");
    if (ec != std::errc()) return invalid(text);
    return v;
  }
  std::string_view digits = text;
  int shift = 0;
  if (digits.size() >= 3 && digits.substr(digits.size() - 2) == "iB") digits.remove_suffix(2);
  if (!digits.empty() && unitShift(digits.back()) >= 0) {
    shift = unitShift(digits.back());
    digits.remove_suffix(1);
  } else if (digits.size() != text.size()) {
    return invalid(text);  // "iB" without a unit letter
  }
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ptr != digits.data() + digits.size()) return invalid(text);
  if (ec == std::errc::result_out_of_range || v > (kMax >> shift))
    return Status::OutOfRange("size '" + std::string(text) + "' is larger than 2^63 - 1 bytes");
  if (ec != std::errc()) return invalid(text);
  return v << shift;
}

}  // namespace tent
