// readBoundedFile: what an input file may be (a regular file under its cap) and the
// messages that name the input and the path when it is not.
#include "base/bounded_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace tent {
namespace {

class BoundedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "tent-bounded-" + std::to_string(getpid());
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  }
  void TearDown() override {
    for (const auto& p : made_) unlink(p.c_str());
    rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    made_.push_back(p);
    return p;
  }
  std::string dir_;
  std::vector<std::string> made_;
};

TEST_F(BoundedFileTest, ReadsARegularFileWhole) {
  const std::string p = write("a.yaml", std::string(100000, 'x') + "end");
  auto f = readBoundedFile(p, "config file");
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_EQ(f->bytes.size(), 100003u);
  EXPECT_EQ(f->bytes.substr(100000), "end");
  EXPECT_TRUE(S_ISREG(f->mode));
}

TEST_F(BoundedFileTest, AFileThatReportsNoSizeIsReadToItsEnd) {
  auto f = readBoundedFile("/proc/self/status", "status");  // st_size 0, content not
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_NE(f->bytes.find("Pid:"), std::string::npos);
}

TEST_F(BoundedFileTest, RefusesDevicesFifosAndDirectoriesNamingTheInput) {
  auto zero = readBoundedFile("/dev/zero", "topology.xml_file");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kIoError);
  EXPECT_EQ(zero.status().message(),
            "topology.xml_file '/dev/zero' is a character device; it must be a regular file");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  made_.push_back(fifo);
  auto f = readBoundedFile(fifo, "input");  // returns at once: nobody writes to it
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "input '" + fifo + "' is a FIFO; it must be a regular file");
  auto d = readBoundedFile(dir_, "input");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("is a directory"), std::string::npos);
}

TEST_F(BoundedFileTest, RefusesAFileOverItsCap) {
  BoundedFileOptions o;
  o.max_bytes = 64 << 10;
  const std::string at_cap = write("at", std::string(64 << 10, 'a'));
  EXPECT_TRUE(readBoundedFile(at_cap, "input", o).ok());
  const std::string over = write("over", std::string((64 << 10) + 1, 'a'));
  auto r = readBoundedFile(over, "bootstrap.auth.secret_file", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "bootstrap.auth.secret_file '" + over +
                                      "' is larger than 64 KiB, the most it may hold");
}

TEST_F(BoundedFileTest, MissingFileIsNotFoundAndASymlinkCanBeRefused) {
  auto missing = readBoundedFile(dir_ + "/none", "input");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
  const std::string target = write("target", "bytes");
  const std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  made_.push_back(link);
  EXPECT_TRUE(readBoundedFile(link, "input").ok());
  BoundedFileOptions o;
  o.no_follow = true;
  auto refused = readBoundedFile(link, "input", o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("symbolic link"), std::string::npos)
      << refused.status().message();
}

TEST(ByteSizeText, StatesCapsPlainly) {
  EXPECT_EQ(byteSizeText(16 << 20), "16 MiB");
  EXPECT_EQ(byteSizeText(64 << 10), "64 KiB");
  EXPECT_EQ(byteSizeText(100), "100 bytes");
  EXPECT_EQ(byteSizeText((1 << 20) + 1), "1048577 bytes");
}

}  // namespace
}  // namespace tent
