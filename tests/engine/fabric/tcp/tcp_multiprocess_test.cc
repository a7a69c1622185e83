// tcp provider across processes: a forked child opens its own provider, registers
// memory, publishes its port identity, QP number and keys through a pipe, and serves
// the parent's WRITEs and READs from its service thread (the child's main thread only
// waits for commands). Every byte is verified on both sides. Then the child is killed or
// frozen: the parent's WRs end in retry-exceeded (outcomes asserted, never times).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

constexpr size_t kLength = 16 << 20;
constexpr uint8_t kChildSeed = 50;

struct Announce {
  PortIdentity port;
  uint32_t qp_num = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};
struct Reply {
  PortIdentity port;
  uint32_t qp_num = 0;
};
struct Command {
  enum Kind : uint8_t { kVerify, kDeregister, kExit } kind = kExit;
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

bool holdsPattern(const uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<uint8_t>(seed + i * 7)) return false;
  }
  return true;
}

// The child: no gtest in here, only exit codes.
[[noreturn]] void childMain(int cmd_fd, int resp_fd) {
  auto provider = createTcpProvider(testConfig());
  if (!provider.ok()) _exit(10);
  Device& dev = (*provider)->device(0);
  auto mem = (*provider)->allocateMemory(kLength, -1);
  if (!mem.ok()) _exit(11);
  auto* buf = static_cast<uint8_t*>(*mem);
  for (size_t j = 0; j < kLength; ++j) buf[j] = static_cast<uint8_t>(kChildSeed + j * 7);
  auto mr = dev.registerMemory(buf, kLength, kAllAccess);
  auto cq = dev.createCq(16);
  if (!mr.ok() || !cq.ok()) _exit(12);
  auto qp = dev.createQp({cq->get(), 4, 1});
  if (!qp.ok()) _exit(13);
  Announce a{dev.portIdentity(), (*qp)->qpNum(), reinterpret_cast<uint64_t>(buf), (*mr)->rkey()};
  Reply r;
  if (!writeAll(resp_fd, &a, sizeof(a)) || !readAll(cmd_fd, &r, sizeof(r))) _exit(14);
  const uint8_t ok = connectQp(**qp, QpRemote::toQp(r.qp_num, r.port)).ok() ? 1 : 0;
  if (!writeAll(resp_fd, &ok, 1)) _exit(15);
  Command c;
  while (readAll(cmd_fd, &c, sizeof(c))) {
    uint8_t answer = 1;
    if (c.kind == Command::kVerify) answer = holdsPattern(buf, kLength, c.seed);
    if (c.kind == Command::kDeregister) mr->reset();
    if (c.kind == Command::kExit) break;
    if (!writeAll(resp_fd, &answer, 1)) break;
  }
  _exit(0);
}

class TcpMultiProcessTest : public ::testing::Test {
 protected:
  void start(uint32_t parent_budget_ms = 10000) {
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
    provider_ = makeProvider(testConfig(parent_budget_ms));
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
      if (stopped_) kill(child_, SIGKILL);
      if (!killed_) {
        Command c;
        c.kind = Command::kExit;
        writeAll(cmd_, &c, sizeof(c));
      }
      int status = 0;
      waitpid(child_, &status, 0);
      if (!killed_) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      }
    }
    close(cmd_);
    close(resp_);
  }
  bool ask(Command::Kind kind, uint8_t seed = 0) {
    Command c{kind, seed};
    uint8_t answer = 0;
    return writeAll(cmd_, &c, sizeof(c)) && readAll(resp_, &answer, 1) && answer == 1;
  }
  // Moves the whole region in chunks of `chunk`, two SGEs per WR, the queue kept full.
  void transfer(WrOpcode op, GuardedBuffer& local, size_t chunk) {
    size_t posted = 0, done = 0;
    while (done < kLength / chunk) {
      while (posted < kLength / chunk && qp_->outstanding() < qp_->maxSendWr()) {
        const size_t off = posted * chunk;
        Sge s[2] = {{local.addr() + off, uint32_t(chunk / 2), local.mr->lkey()},
                    {local.addr() + off + chunk / 2, uint32_t(chunk / 2), local.mr->lkey()}};
        post(*qp_, makeWr(posted, op, s, 2, peer_.addr + off, peer_.rkey));
        ++posted;
      }
      for (const auto& wc : pollN(*cq_, 1)) {
        ASSERT_EQ(wc.status, WcStatus::kSuccess) << toString(wc.status);
        ASSERT_EQ(wc.wr_id, done);
        ++done;
      }
    }
  }

  pid_t child_ = -1;
  bool killed_ = false;
  bool stopped_ = false;
  int cmd_ = -1, resp_ = -1;
  Announce peer_;
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
};

TEST_F(TcpMultiProcessTest, WriteAndReadMemoryOfAnotherProcess) {
  start();
  GuardedBuffer local(*dev_, kLength, kAllAccess);
  // READ the child's pattern, every byte.
  local.clear();
  transfer(WrOpcode::kRdmaRead, local, 1 << 20);
  EXPECT_TRUE(local.holds(kChildSeed));
  EXPECT_TRUE(local.canariesIntact());
  // WRITE ours over it and let the child check every byte.
  local.fill(91);
  transfer(WrOpcode::kRdmaWrite, local, 256 << 10);
  EXPECT_TRUE(ask(Command::kVerify, 91));
  // Small WRITEs too (one header and a few bytes each).
  local.fill(92);
  transfer(WrOpcode::kRdmaWrite, local, 8 << 10);
  EXPECT_TRUE(ask(Command::kVerify, 92));
}

TEST_F(TcpMultiProcessTest, ADeregisteredRegionIsRefusedByThePeer) {
  start();
  GuardedBuffer local(*dev_, 4096, kAllAccess);
  local.fill(5);
  Sge s{local.addr(), 4096, local.mr->lkey()};
  post(*qp_, makeWr(1, WrOpcode::kRdmaWrite, &s, 1, peer_.addr, peer_.rkey));
  auto wcs = pollN(*cq_, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  ASSERT_TRUE(ask(Command::kDeregister));
  post(*qp_, makeWr(2, WrOpcode::kRdmaWrite, &s, 1, peer_.addr + 4096, peer_.rkey));
  wcs = pollN(*cq_, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteAccess) << toString(wcs[0].status);
}

// A killed peer's kernel closes its connections: WRs outstanding then, and WRs posted
// after, fail with retry-exceeded (the first), flushed (the rest). Never success.
TEST_F(TcpMultiProcessTest, AKilledPeerTurnsIntoRetryExceeded) {
  start();
  GuardedBuffer local(*dev_, kLength, kAllAccess);
  local.fill(7);
  transfer(WrOpcode::kRdmaWrite, local, 1 << 20);  // the connection works
  // Keep the queue full of large WRITEs, then kill the child.
  for (uint64_t i = 0; i < 16; ++i) {
    Sge s{local.addr(), static_cast<uint32_t>(kLength / 2), local.mr->lkey()};
    post(*qp_, makeWr(100 + i, WrOpcode::kRdmaWrite, &s, 1, peer_.addr, peer_.rkey));
  }
  ASSERT_EQ(kill(child_, SIGKILL), 0);
  killed_ = true;
  auto wcs = pollN(*cq_, 16);
  ASSERT_EQ(wcs.size(), 16u);
  size_t successes = 0, retry = 0, flushed = 0;
  for (size_t i = 0; i < wcs.size(); ++i) {
    EXPECT_EQ(wcs[i].wr_id, 100 + i);
    if (wcs[i].status == WcStatus::kSuccess) {
      EXPECT_EQ(retry + flushed, 0u) << "a success after a failure";
      ++successes;
    } else if (wcs[i].status == WcStatus::kRetryExceeded) {
      EXPECT_EQ(flushed, 0u);
      ++retry;
    } else {
      EXPECT_EQ(wcs[i].status, WcStatus::kFlushed) << toString(wcs[i].status);
      ++flushed;
    }
  }
  EXPECT_EQ(retry, 1u);
  EXPECT_EQ(qp_->state(), QpState::kError);
}

// A frozen peer (SIGSTOP) keeps its kernel answering TCP, so only the provider's own
// bound notices: no progress for the retry budget fails the WRs.
TEST_F(TcpMultiProcessTest, AFrozenPeerTurnsIntoRetryExceededWithinTheBudget) {
  start(/*parent_budget_ms=*/300);
  GuardedBuffer local(*dev_, 4096, kAllAccess);
  local.fill(8);
  Sge s{local.addr(), 4096, local.mr->lkey()};
  post(*qp_, makeWr(1, WrOpcode::kRdmaWrite, &s, 1, peer_.addr, peer_.rkey));
  auto wcs = pollN(*cq_, 1);
  ASSERT_EQ(wcs.size(), 1u);
  ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
  ASSERT_EQ(kill(child_, SIGSTOP), 0);
  stopped_ = true;
  killed_ = true;
  int status = 0;  // returns once every thread of the child is stopped
  ASSERT_EQ(waitpid(child_, &status, WUNTRACED), child_);
  ASSERT_TRUE(WIFSTOPPED(status));
  post(*qp_, makeWr(2, WrOpcode::kRdmaWrite, &s, 1, peer_.addr, peer_.rkey));
  post(*qp_, makeWr(3, WrOpcode::kRdmaRead, &s, 1, peer_.addr, peer_.rkey));
  wcs = pollN(*cq_, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded) << toString(wcs[0].status);
  EXPECT_EQ(wcs[1].status, WcStatus::kFlushed) << toString(wcs[1].status);
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
