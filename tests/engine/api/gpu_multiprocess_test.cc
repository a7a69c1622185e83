// The soft provider moves GPU memory between two processes, on the fake CUDA driver
// in both (tests/cuda/fake_cuda.h: its device memory is memfd-backed host memory, and
// its IPC really crosses processes): the peer's cuMemAlloc memory through legacy IPC
// handles, its VMM memory through a POSIX descriptor copied with pidfd_getfd. Every
// byte is checked by the peer in its own memory; each registration is opened here
// once, however many WRs use it, and closed with the segment.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/engine_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::testing {
namespace {

using cuda::testing::FakeCuda;

struct GpuPeer {
  pid_t pid = -1;
  FILE* in = nullptr;
  FILE* out = nullptr;
  std::string segment;
  uint64_t vmm = 0, legacy = 0, size = 0;

  bool start() {
    const char* exe = std::getenv("TENT_GPU_PEER");
    int to[2], from[2];
    if (exe == nullptr || pipe(to) != 0 || pipe(from) != 0) return false;
    pid = fork();
    if (pid == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      close(to[1]);
      close(from[0]);
      execl(exe, exe, "127.0.0.1:0", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    in = fdopen(to[1], "w");
    out = fdopen(from[0], "r");
    char seg[256];
    if (std::fscanf(out, "READY %255s %" SCNu64 " %" SCNu64 " %" SCNu64, seg, &vmm, &legacy,
                    &size) != 4)
      return false;
    segment = seg;
    return true;
  }
  long ask(const char* cmd, uint64_t addr, uint64_t len, unsigned seed) {
    std::fprintf(in, "%s %" PRIu64 " %" PRIu64 " %u\n", cmd, addr, len, seed);
    std::fflush(in);
    long answer = -3;
    return std::fscanf(out, "%ld", &answer) == 1 ? answer : -3;
  }
  int stop() {
    std::fprintf(in, "QUIT 0 0 0\n");
    std::fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    std::fclose(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

// `retrying`: a refused submit (a peer reconnecting) is an answer, not a test failure.
TransferState move(TransferEngineImpl& e, SegmentId seg, OpCode op, void* local, uint64_t remote,
                   uint64_t len, bool retrying = false) {
  auto b = e.allocateBatch(1);
  if (!b.ok()) return TransferState::FAILED;
  Request r;
  r.opcode = op;
  r.source = local;
  r.target_id = seg;
  r.target_offset = remote;
  r.length = len;
  Status s = e.submitTransfer(*b, {&r, 1});
  if (!retrying) {
    EXPECT_TRUE(s.ok()) << s.toString();
  }
  const TransferState st = s.ok() ? waitTask(e, *b, 0).state : TransferState::FAILED;
  EXPECT_TRUE(e.freeBatch(*b).ok());
  return st;
}

TEST(GpuMultiprocess, SoftMovesGpuMemoryBetweenProcessesThroughIpc) {
  TENT_SKIP_UNLESS_SOFT("CUDA IPC between processes");
  FakeCuda fake;
  GpuPeer peer;
  ASSERT_TRUE(peer.start()) << "gpu_peer did not start (TENT_GPU_PEER)";
  {
    auto engine = makeEngine(simYaml());
    ASSERT_NE(engine, nullptr);
    auto seg = engine->openSegment(peer.segment);
    ASSERT_TRUE(seg.ok()) << seg.status().toString();
    const size_t n = 1 << 20;
    auto* gpu = static_cast<uint8_t*>(*engine->allocateLocalMemory(n, "cuda:0"));
    auto* host = static_cast<uint8_t*>(*engine->allocateLocalMemory(n, "cpu:0"));
    for (int round = 0; round < 3; ++round) {
      const unsigned seed = 10 * round;
      fillPattern(gpu, n, seed + 1);
      ASSERT_EQ(move(*engine, *seg, OpCode::WRITE, gpu, peer.vmm, n), TransferState::COMPLETED);
      EXPECT_EQ(peer.ask("CHECK", peer.vmm, n, seed + 1), -1) << "GPU -> peer VMM, round " << round;
      fillPattern(gpu, n, seed + 2);
      ASSERT_EQ(move(*engine, *seg, OpCode::WRITE, gpu, peer.legacy, n), TransferState::COMPLETED);
      EXPECT_EQ(peer.ask("CHECK", peer.legacy, n, seed + 2), -1) << "GPU -> peer cuMemAlloc";
      ASSERT_EQ(peer.ask("FILL", peer.legacy, n, seed + 3), 0);
      ASSERT_EQ(move(*engine, *seg, OpCode::READ, host, peer.legacy, n), TransferState::COMPLETED);
      EXPECT_EQ(checkPattern(host, n, seed + 3), -1) << "peer cuMemAlloc -> host";
      ASSERT_EQ(peer.ask("FILL", peer.vmm, n, seed + 4), 0);
      ASSERT_EQ(move(*engine, *seg, OpCode::READ, gpu, peer.vmm, n), TransferState::COMPLETED);
      EXPECT_EQ(checkPattern(gpu, n, seed + 4), -1) << "peer VMM -> GPU";
    }
    // Once per registration (each of the peer's two devices registers its own), not per WR.
    EXPECT_GE(fake.calls("cuIpcOpenMemHandle"), 1);
    EXPECT_LE(fake.calls("cuIpcOpenMemHandle"), 2);
    EXPECT_GE(fake.calls("cuMemImportFromShareableHandle"), 1);
    EXPECT_LE(fake.calls("cuMemImportFromShareableHandle"), 2);
    EXPECT_GT(fake.live().ipc_mappings, 0);
    // The peer registers its buffer again (same MR slots, new registrations): what was
    // opened for the old one is closed, the new one opened, and the bytes still land.
    for (int round = 0; round < 3; ++round) {
      const int opened = fake.calls("cuIpcOpenMemHandle");
      ASSERT_EQ(peer.ask("REREG", 0, 0, 0), 0);
      ASSERT_TRUE(eventually([&] {  // the peer pushes its new descriptor
        fillPattern(gpu, n, 50 + round);
        return move(*engine, *seg, OpCode::WRITE, gpu, peer.legacy, n, true) ==
                   TransferState::COMPLETED &&
               peer.ask("CHECK", peer.legacy, n, 50 + round) == -1;
      }));
      EXPECT_GT(fake.calls("cuIpcOpenMemHandle"), opened) << "round " << round;
      EXPECT_LE(fake.live().ipc_mappings, 2) << "old imports closed, round " << round;
    }
  }
  EXPECT_EQ(fake.live().ipc_mappings, 0) << "the peer's memory is closed with the engine";
  EXPECT_EQ(fake.calls("cuIpcCloseMemHandle"), fake.calls("cuIpcOpenMemHandle"));
  EXPECT_GE(fake.calls("cuIpcCloseMemHandle"), 3);
  EXPECT_EQ(fake.live().physical, 0);
  EXPECT_EQ(fake.live().streams, 0);
  EXPECT_EQ(peer.stop(), 0);
}

}  // namespace
}  // namespace tent::testing
