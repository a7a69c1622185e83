// Soft SEND / RECV across processes: the receiver is a forked child whose receive
// buffers are plain heap memory; the parent's SENDs reach them through the child's
// receive queue segment, under credits, and the child checks every byte.
#include <sys/wait.h>
#include <unistd.h>

#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

// Across processes: the receiver is a forked child whose receive buffers are plain
// heap memory; the parent's SENDs reach them through its receive queue segment.
constexpr uint32_t kCrossSends = 32;
struct Hello {
  PortIdentity port;
  uint32_t qp_num = 0;
};

[[noreturn]] void receiverChild(int to_parent, int from_parent) {
  auto provider = createSoftProvider(testConfig(), {softDevice("child0")});
  if (!provider.ok()) _exit(10);
  Device& dev = (*provider)->device(0);
  auto cq = std::move(dev.createCq(64)).value();
  auto rcq = std::move(dev.createCq(64)).value();
  auto qp = dev.createQp({cq.get(), 4, 1, rcq.get(), 8});
  if (!qp.ok()) _exit(11);
  std::vector<uint8_t> heap(8 * 256, 0);
  auto mr = dev.registerMemory(heap.data(), heap.size(), kAccessLocalWrite);
  if (!mr.ok()) _exit(12);
  Hello mine{dev.portIdentity(), (*qp)->qpNum()};
  Hello theirs;
  if (write(to_parent, &mine, sizeof(mine)) != sizeof(mine)) _exit(13);
  if (read(from_parent, &theirs, sizeof(theirs)) != sizeof(theirs)) _exit(14);
  if (!connectQp(**qp, QpRemote::toQp(theirs.qp_num, theirs.port)).ok()) _exit(15);
  auto repost = [&](uint64_t slot) {
    Sge g{reinterpret_cast<uint64_t>(heap.data()) + slot * 256, 256, (*mr)->lkey()};
    RecvWr w{slot, 1, &g, nullptr};
    const RecvWr* bad = nullptr;
    return (*qp)->postRecv(&w, &bad) == 0;
  };
  for (uint64_t i = 0; i < 8; ++i) {
    if (!repost(i)) _exit(16);
  }
  const uint8_t ready = 1;
  if (write(to_parent, &ready, 1) != 1) _exit(17);
  for (uint32_t n = 0; n < kCrossSends; ++n) {
    // One at a time: each one verified, reposted and credited before the next.
    std::vector<WorkCompletion> got(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int polled = 0;
    while ((polled = rcq->poll(got.data(), 1)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (polled != 1) _exit(20);
    if (got[0].status != WcStatus::kSuccess) _exit(30 + static_cast<int>(got[0].status));
    if (got[0].byte_len != 256) _exit(24);
    const uint8_t* p = heap.data() + got[0].wr_id * 256;
    for (uint32_t i = 0; i < 256; ++i) {
      if (p[i] != static_cast<uint8_t>(n + i)) _exit(21);
    }
    if (!repost(got[0].wr_id)) _exit(22);
    if (write(to_parent, &ready, 1) != 1) _exit(23);  // a credit back
  }
  _exit(0);
}

TEST(SoftSendRecvCrossProcess, SendsReachAnotherProcessesReceivesWithEveryByte) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    receiverChild(up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  // The child's exit code names its failed step when it stops answering.
  auto childGone = [child]() {
    int st = 0;
    waitpid(child, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  {
    auto provider = makeProvider({softDevice("parent0")});
    ASSERT_NE(provider, nullptr);
    Device& dev = provider->device(0);
    auto cq = std::move(dev.createCq(64)).value();
    auto qp = std::move(dev.createQp({cq.get(), 8, 1})).value();
    Hello theirs;
    ASSERT_EQ(read(up[0], &theirs, sizeof(theirs)), static_cast<ssize_t>(sizeof(theirs)));
    Hello mine{dev.portIdentity(), qp->qpNum()};
    ASSERT_EQ(write(down[1], &mine, sizeof(mine)), static_cast<ssize_t>(sizeof(mine)));
    ASSERT_TRUE(connectQp(*qp, QpRemote::toQp(theirs.qp_num, theirs.port)).ok());
    uint8_t ready = 0;
    ASSERT_EQ(read(up[0], &ready, 1), 1) << "child exit code " << childGone();
    GuardedBuffer s(dev, 256, kAccessLocalWrite);
    uint32_t credits = 8;
    for (uint32_t n = 0; n < kCrossSends; ++n) {
      if (credits == 0) {  // wait for the child to repost one
        ASSERT_EQ(read(up[0], &ready, 1), 1) << "child exit code " << childGone();
        ++credits;
      }
      for (uint32_t i = 0; i < 256; ++i) s.data()[i] = static_cast<uint8_t>(n + i);
      Sge g{s.addr(), 256, s.mr->lkey()};
      post(*qp, makeWr(n, WrOpcode::kSend, &g, 1, 0, 0));
      auto sent = pollN(*cq, 1, std::chrono::seconds(60));
      ASSERT_EQ(sent.size(), 1u);
      ASSERT_EQ(sent[0].status, WcStatus::kSuccess) << toString(sent[0].status);
      --credits;
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the receiver child's exit code names its failed step";
  close(up[0]);
  close(down[1]);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
