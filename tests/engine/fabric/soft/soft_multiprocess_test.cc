// Soft provider across processes: a forked child registers shared memory (from
// allocateMemory) and plain heap memory, publishes its identity and keys through a
// pipe, and the parent WRITEs and READs them. Every byte is verified on both sides.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

constexpr size_t kLength = 1 << 20;
constexpr uint8_t kChildSeed = 50;

struct Announce {
  PortIdentity port;
  uint32_t qp_num = 0;
  uint64_t addr[2] = {};  // 0: shared memory, 1: heap
  uint32_t rkey[2] = {};
};
struct Reply {
  PortIdentity port;
  uint32_t qp_num = 0;
};
struct Command {
  enum Kind : uint8_t { kVerify, kDeregister, kExit } kind = kExit;
  uint8_t buffer = 0;
  uint8_t seed = 0;
};

bool readAll(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool writeAll(int fd, const void* p, size_t n) {
  return write(fd, p, n) == static_cast<ssize_t>(n);
}

bool shmFileExists(const std::string& prefix) {
  bool found = false;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) found |= std::string(e->d_name).rfind(prefix, 0) == 0;
    closedir(d);
  }
  return found;
}

// Whether this process maps a file whose name contains `needle` (/proc/self/maps).
bool mapsFile(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

bool holdsPattern(const uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<uint8_t>(seed + i * 7)) return false;
  }
  return true;
}

// The child: no gtest in here, only exit codes.
[[noreturn]] void childMain(int cmd_fd, int resp_fd) {
  auto provider = createSoftProvider(testConfig(), {softDevice("child0")});
  if (!provider.ok()) _exit(10);
  Device& dev = (*provider)->device(0);
  auto shm = (*provider)->allocateMemory(kLength, -1);
  if (!shm.ok()) _exit(11);
  std::vector<uint8_t> heap(kLength);
  uint8_t* bufs[2] = {static_cast<uint8_t*>(*shm), heap.data()};
  std::unique_ptr<MemoryRegion> mrs[2];
  Announce a;
  for (int i = 0; i < 2; ++i) {
    for (size_t j = 0; j < kLength; ++j) bufs[i][j] = static_cast<uint8_t>(kChildSeed + j * 7);
    auto mr = dev.registerMemory(bufs[i], kLength, kAllAccess);
    if (!mr.ok()) _exit(12);
    mrs[i] = std::move(mr).value();
    a.addr[i] = reinterpret_cast<uint64_t>(bufs[i]);
    a.rkey[i] = mrs[i]->rkey();
  }
  auto cq = dev.createCq(16);
  auto qp = dev.createQp({cq->get(), 4, 1});
  if (!cq.ok() || !qp.ok()) _exit(13);
  a.port = dev.portIdentity();
  a.qp_num = (*qp)->qpNum();
  Reply r;
  if (!writeAll(resp_fd, &a, sizeof(a)) || !readAll(cmd_fd, &r, sizeof(r))) _exit(14);
  const uint8_t ok = connectQp(**qp, QpRemote::toQp(r.qp_num, r.port)).ok() ? 1 : 0;
  if (!writeAll(resp_fd, &ok, 1)) _exit(15);
  Command c;
  while (readAll(cmd_fd, &c, sizeof(c))) {
    uint8_t answer = 1;
    if (c.kind == Command::kVerify) answer = holdsPattern(bufs[c.buffer], kLength, c.seed);
    if (c.kind == Command::kDeregister) mrs[c.buffer].reset();
    if (c.kind == Command::kExit) break;
    if (!writeAll(resp_fd, &answer, 1)) break;
  }
  _exit(0);
}

class SoftMultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int cmd[2], resp[2];
    ASSERT_EQ(pipe(cmd), 0);
    ASSERT_EQ(pipe(resp), 0);
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      close(cmd[1]);
      close(resp[0]);
      childMain(cmd[0], resp[1]);
    }
    close(cmd[0]);
    close(resp[1]);
    cmd_ = cmd[1];
    resp_ = resp[0];
    ASSERT_TRUE(readAll(resp_, &peer_, sizeof(peer_)));
    provider_ = makeProvider({softDevice("parent0", 0, parent_latency_ns_)});
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
    cq_ = std::move(dev_->createCq(64)).value();
    qp_ = std::move(dev_->createQp({cq_.get(), 16, 4})).value();
    ASSERT_TRUE(connectQp(*qp_, QpRemote::toQp(peer_.qp_num, peer_.port)).ok());
    Reply r{dev_->portIdentity(), qp_->qpNum()};
    ASSERT_TRUE(writeAll(cmd_, &r, sizeof(r)));
    uint8_t ok = 0;
    ASSERT_TRUE(readAll(resp_, &ok, 1));
    ASSERT_EQ(ok, 1);
  }
  void TearDown() override {
    if (child_ > 0) {
      Command c;
      c.kind = Command::kExit;
      writeAll(cmd_, &c, sizeof(c));
      int status = 0;
      waitpid(child_, &status, 0);
      if (!killed_) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      }
    }
    close(cmd_);
    close(resp_);
  }
  bool ask(Command::Kind kind, uint8_t buffer, uint8_t seed = 0) {
    Command c{kind, buffer, seed};
    uint8_t answer = 0;
    return writeAll(cmd_, &c, sizeof(c)) && readAll(resp_, &answer, 1) && answer == 1;
  }
  // Moves `length` bytes at `offset` in chunks of `chunk`, two SGEs per WR.
  void transfer(WrOpcode op, GuardedBuffer& local, int buffer, size_t chunk) {
    std::vector<Sge> sges(2);
    size_t posted = 0, done = 0;
    uint64_t id = 0;
    while (done < kLength / chunk) {
      while (posted < kLength / chunk && qp_->outstanding() < qp_->maxSendWr()) {
        const size_t off = posted * chunk;
        Sge s[2] = {{local.addr() + off, uint32_t(chunk / 2), local.mr->lkey()},
                    {local.addr() + off + chunk / 2, uint32_t(chunk / 2), local.mr->lkey()}};
        SendWr wr = makeWr(id++, op, s, 2, peer_.addr[buffer] + off, peer_.rkey[buffer]);
        post(*qp_, wr);
        ++posted;
      }
      for (const auto& wc : pollN(*cq_, 1)) {
        ASSERT_EQ(wc.status, WcStatus::kSuccess) << toString(wc.status);
        ++done;
      }
    }
  }

  // Latency of the parent's port: WRs stay unacknowledged that long.
  uint64_t parent_latency_ns_ = 0;
  pid_t child_ = -1;
  bool killed_ = false;
  int cmd_ = -1, resp_ = -1;
  Announce peer_;
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
};

TEST_F(SoftMultiProcessTest, WriteAndReadSharedAndHeapMemoryOfAnotherProcess) {
  for (int buffer = 0; buffer < 2; ++buffer) {
    SCOPED_TRACE(buffer == 0 ? "shared memory" : "heap memory");
    GuardedBuffer local(*dev_, kLength, kAllAccess);
    transfer(WrOpcode::kRdmaRead, local, buffer, 64 * 1024);
    EXPECT_TRUE(local.holds(kChildSeed));
    const uint8_t seed = static_cast<uint8_t>(60 + buffer);
    local.fill(seed);
    transfer(WrOpcode::kRdmaWrite, local, buffer, 4096);
    EXPECT_TRUE(ask(Command::kVerify, static_cast<uint8_t>(buffer), seed));
    GuardedBuffer back(*dev_, kLength, kAllAccess);
    transfer(WrOpcode::kRdmaRead, back, buffer, 256 * 1024);
    EXPECT_TRUE(back.holds(seed));
    EXPECT_TRUE(local.canariesIntact() && back.canariesIntact());
  }
  // The shared memory was reached through a mapping of the child's segment (the fast
  // path), the heap through process_vm_readv/writev.
  EXPECT_TRUE(mapsFile("tent-soft-" + std::to_string(child_) + "-"));
}

TEST_F(SoftMultiProcessTest, OutOfRegionWriteFailsAndLeavesThePeerUntouched) {
  GuardedBuffer local(*dev_, 128, kAllAccess);
  local.fill(1);
  Sge sge{local.addr(), 128, local.mr->lkey()};
  post(*qp_, makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, peer_.addr[1] + kLength - 64, peer_.rkey[1]));
  auto wcs = pollN(*cq_, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(ask(Command::kVerify, 1, kChildSeed));
}

TEST_F(SoftMultiProcessTest, DeregistrationInThePeerIsImmediate) {
  ASSERT_TRUE(ask(Command::kDeregister, 0));
  GuardedBuffer local(*dev_, 64, kAllAccess);
  Sge sge{local.addr(), 64, local.mr->lkey()};
  post(*qp_, makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, peer_.addr[0], peer_.rkey[0]));
  auto wcs = pollN(*cq_, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(ask(Command::kVerify, 0, kChildSeed));
}

class SoftDeadPeerTest : public SoftMultiProcessTest, public ::testing::WithParamInterface<int> {
 protected:
  // 20 ms of latency: a WR posted just before the kill is still unacknowledged when
  // the child dies, however the machine schedules this test.
  void SetUp() override {
    parent_latency_ns_ = 20'000'000;
    SoftMultiProcessTest::SetUp();
  }
  void killChild() {
    ASSERT_EQ(kill(child_, SIGKILL), 0);
    killed_ = true;
    int status = 0;
    ASSERT_EQ(waitpid(child_, &status, 0), child_);
    dead_pid_ = child_;
    child_ = -1;
  }
  pid_t dead_pid_ = -1;
};

// As on RC: the child is SIGKILLed while WRs to it are unacknowledged. The first
// completes with retry-exceeded (after the retry budget), the rest are flushed, the
// QP is in ERR, and no WRITE to the dead peer is reported delivered - although the
// copy itself reached the peer's memory at post time. Nothing here depends on
// timing: no completion is polled between the posts and the kill.
TEST_P(SoftDeadPeerTest, UnacknowledgedWrsFailWithRetryExceededThenFlush) {
  const int buffer = GetParam();
  GuardedBuffer local(*dev_, 4096, kAllAccess);
  local.fill(3);
  Sge sge{local.addr(), 4096, local.mr->lkey()};
  for (uint64_t id = 1; id <= 3; ++id)
    post(*qp_, makeWr(id, WrOpcode::kRdmaWrite, &sge, 1, peer_.addr[buffer], peer_.rkey[buffer]));
  killChild();
  auto wcs = pollN(*cq_, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(wcs[0].byte_len, 0u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].status, WcStatus::kFlushed);
  }
  EXPECT_EQ(qp_->state(), QpState::kError);
  EXPECT_EQ(qp_->outstanding(), 0u);
  const SendWr after =
      makeWr(9, WrOpcode::kRdmaWrite, &sge, 1, peer_.addr[buffer], peer_.rkey[buffer]);
  const SendWr* bad = nullptr;
  EXPECT_EQ(qp_->postSend(&after, &bad), EINVAL);
  // The dead child's files stay until a soft provider (this one, or one of any other
  // process running meanwhile) sweeps them away.
  const std::string prefix = "tent-soft-" + std::to_string(dead_pid_) + "-";
  auto sweeper = makeProvider({softDevice("sweeper")});
  EXPECT_FALSE(shmFileExists(prefix));
}

// A QP connected to a peer that is already dead posts fine (RTR does not talk to
// the peer, as on a NIC) and its WR fails with retry-exceeded.
TEST_P(SoftDeadPeerTest, WrPostedAfterTheDeathFailsWithRetryExceeded) {
  const int buffer = GetParam();
  killChild();
  auto cq = std::move(dev_->createCq(8)).value();
  auto qp = std::move(dev_->createQp({cq.get(), 4, 1})).value();
  ASSERT_TRUE(connectQp(*qp, QpRemote::toQp(peer_.qp_num, peer_.port)).ok());
  GuardedBuffer local(*dev_, 64, kAllAccess);
  Sge sge{local.addr(), 64, local.mr->lkey()};
  post(*qp, makeWr(7, WrOpcode::kRdmaRead, &sge, 1, peer_.addr[buffer], peer_.rkey[buffer]));
  auto wcs = pollN(*cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(qp->state(), QpState::kError);
}

INSTANTIATE_TEST_SUITE_P(SharedAndHeap, SoftDeadPeerTest, ::testing::Values(0, 1));

}  // namespace
}  // namespace tent::fabric::soft::testing
