// base/byte_size.h: the one size rule of flags and config (the shared table), and the
// bounds of what it can name.
#include "base/byte_size.h"

#include <gtest/gtest.h>

#include "tests/support/byte_size_table.h"

namespace tent {
namespace {

TEST(ByteSize, TheSharedTable) {
  for (const auto& c : testing::kByteSizeCases) {
    auto v = parseByteSize(c.text);
    EXPECT_EQ(v.ok(), c.valid) << "'" << c.text << "'";
    if (v.ok() && c.valid) {
      EXPECT_EQ(*v, c.bytes) << c.text;
    }
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("64k"), std::string::npos) << c.text;
    }
  }
}

TEST(ByteSize, TerabytesAndTheTopOfTheRange) {
  EXPECT_EQ(*parseByteSize("2T"), uint64_t{2} << 40);
  EXPECT_EQ(*parseByteSize("2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(*parseByteSize("9223372036854775807"), uint64_t{9223372036854775807});
  EXPECT_EQ(parseByteSize("9223372036854775808").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(parseByteSize("8388608T").status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(*parseByteSize("8388607T"), uint64_t{8388607} << 40);
  EXPECT_EQ(parseByteSize("99999999999999999999999").status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace tent
