// Moving GPU memory through the soft provider in one process, on the fake CUDA
// driver (its device memory is host memory, so the test reads the bytes directly):
// GPU->GPU and host<->GPU WRITE and READ with every byte verified, copies made by
// the driver's memcpy on the QP's stream, completions that wait for the copies, and
// every stream and context reference returned when the engine closes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/support/engine_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::testing {
namespace {

using cuda::testing::FakeCuda;
using cuda::testing::FakeCudaOptions;

constexpr size_t kLen = 1 << 20;
constexpr size_t kMiB = size_t{1} << 20;

Request request(OpCode op, void* local, void* remote, uint64_t len) {
  Request r;
  r.opcode = op;
  r.source = local;
  r.target_id = LOCAL_SEGMENT_ID;
  r.target_offset = reinterpret_cast<uint64_t>(remote);
  r.length = len;
  return r;
}

// `retrying`: a refused submit (a peer reconnecting) is an answer, not a test failure.
TransferState run(TransferEngineImpl& e, const Request& r, bool retrying = false) {
  auto b = e.allocateBatch(1);
  EXPECT_TRUE(b.ok());
  if (!b.ok()) return TransferState::FAILED;
  Status s = e.submitTransfer(*b, {&r, 1});
  if (!retrying) {
    EXPECT_TRUE(s.ok()) << s.toString();
  }
  const TransferState st = s.ok() ? waitTask(e, *b, 0).state : TransferState::FAILED;
  EXPECT_TRUE(e.freeBatch(*b).ok());
  return st;
}

struct GpuTransfer : ::testing::Test {
  void start(FakeCudaOptions options = {}) {
    fake = std::make_unique<FakeCuda>(options);
    engine = makeEngine(simYaml());
    ASSERT_NE(engine, nullptr);
    gpu_a = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLen, "cuda:0"));
    gpu_b = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLen, "cuda:0"));
    host = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLen, "cpu:0"));
  }
  void TearDown() override {
    engine.reset();
    if (fake) {
      const auto live = fake->live();
      EXPECT_EQ(live.streams, 0) << "every copy lane goes with its QP";
      EXPECT_EQ(live.context_refs, 0);
      EXPECT_EQ(live.physical, 0);
    }
    fake.reset();
  }
  std::unique_ptr<FakeCuda> fake;
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* gpu_a = nullptr;
  uint8_t* gpu_b = nullptr;
  uint8_t* host = nullptr;
};

TEST_F(GpuTransfer, GpuToGpuAndHostBothWaysVerifyEveryByte) {
  start();
  fillPattern(gpu_a, kLen, 1);
  std::memset(gpu_b, 0, kLen);
  ASSERT_EQ(run(*engine, request(OpCode::WRITE, gpu_a, gpu_b, kLen)), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(gpu_b, kLen, 1), -1) << "GPU->GPU WRITE";
  std::memset(host, 0, kLen);
  ASSERT_EQ(run(*engine, request(OpCode::READ, host, gpu_b, kLen)), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(host, kLen, 1), -1) << "GPU->host READ";
  fillPattern(host, kLen, 2);
  ASSERT_EQ(run(*engine, request(OpCode::WRITE, host, gpu_a, kLen)), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(gpu_a, kLen, 2), -1) << "host->GPU WRITE";
  std::memset(gpu_b, 0, kLen);
  ASSERT_EQ(run(*engine, request(OpCode::READ, gpu_b, gpu_a, kLen)), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(gpu_b, kLen, 2), -1) << "GPU->GPU READ";
  fillPattern(gpu_a, kLen, 3);
  std::memset(host, 0, kLen);
  ASSERT_EQ(run(*engine, request(OpCode::WRITE, gpu_a, host, kLen)), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(host, kLen, 3), -1) << "GPU->host WRITE";
  if (testFabric() != TestFabric::kSoft) return;  // a NIC moved them, not the driver
  // The driver moved them: one asynchronous copy per slice, on the engine's streams.
  size_t async = 0, bytes = 0;
  for (const auto& c : fake->copies()) {
    async += c.async;
    bytes += c.bytes;
  }
  EXPECT_EQ(async, 5 * kLen / 65536);
  EXPECT_EQ(bytes, 5 * kLen);
}

TEST_F(GpuTransfer, ACompletionWaitsUntilTheDriverHasCopied) {
  TENT_SKIP_UNLESS_SOFT("copying device memory with the CUDA driver");
  FakeCudaOptions deferred;
  deferred.deferred_streams = true;
  start(deferred);
  fillPattern(gpu_a, 65536, 7);
  std::memset(gpu_b, 0, 65536);
  auto b = engine->allocateBatch(1);
  ASSERT_TRUE(b.ok());
  const Request r = request(OpCode::WRITE, gpu_a, gpu_b, 65536);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  // Posted once the loopback endpoint is up: the copy then waits on the stream.
  ASSERT_TRUE(eventually([&] {
    engine->transport().stepPollers();
    return fake->queuedOps() > 0;
  }));
  // The link model would show the completion at once (unlimited link): the copy is not done.
  for (int i = 0; i < 200; ++i) {
    engine->transport().stepPollers();
    auto st = engine->getTransferStatus(*b, 0);
    ASSERT_TRUE(st.ok());
    ASSERT_EQ(st->state, TransferState::PENDING)
        << "completed before the copy ran (step " << i << ")";
  }
  EXPECT_NE(checkPattern(gpu_b, 65536, 7), -1);
  fake->runStreams();
  ASSERT_EQ(waitTask(*engine, *b, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(gpu_b, 65536, 7), -1);
  ASSERT_TRUE(engine->freeBatch(*b).ok());
}

TEST_F(GpuTransfer, ACopyTheDriverRefusesFailsTheTaskAndTheEngineRecovers) {
  // soft copies on its lanes, tcp through its staging buffers; fake-verbs has no copies.
  if (testFabric() == TestFabric::kFakeVerbs) GTEST_SKIP() << "the NIC moves device memory";
  start();
  fillPattern(gpu_a, 65536, 11);
  ASSERT_EQ(run(*engine, request(OpCode::WRITE, gpu_a, gpu_b, 65536)), TransferState::COMPLETED);
  fake->fail_memcpy = cuda::CUDA_ERROR_INVALID_VALUE;
  ASSERT_EQ(run(*engine, request(OpCode::WRITE, gpu_a, gpu_b, 65536)), TransferState::FAILED);
  fake->fail_memcpy = cuda::CUDA_SUCCESS;
  // The endpoints were reset; a later transfer reconnects and succeeds.
  ASSERT_TRUE(drainPollers(*engine));
  fillPattern(gpu_a, 65536, 12);
  ASSERT_TRUE(eventually([&] {
    return run(*engine, request(OpCode::WRITE, gpu_a, gpu_b, 65536), true) ==
           TransferState::COMPLETED;
  }));
  EXPECT_EQ(checkPattern(gpu_b, 65536, 12), -1);
}

TEST_F(GpuTransfer, ARequestAcrossTwoPhysicalChunksIsRefused) {
  start();
  auto* base = static_cast<uint8_t*>(fake->appVmm(0, {2 * kMiB, 2 * kMiB}));
  ASSERT_TRUE(engine->registerLocalMemory(base, 4 * kMiB).ok());
  auto b = engine->allocateBatch(1);
  ASSERT_TRUE(b.ok());
  const Request across = request(OpCode::WRITE, base + 2 * kMiB - 4096, gpu_a, 8192);
  EXPECT_EQ(engine->submitTransfer(*b, {&across, 1}).code(), StatusCode::kInvalidArgument);
  const Request inside = request(OpCode::WRITE, base + 2 * kMiB, gpu_a, 8192);
  fillPattern(base + 2 * kMiB, 8192, 9);
  ASSERT_EQ(run(*engine, inside), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(gpu_a, 8192, 9), -1);
  ASSERT_TRUE(engine->freeBatch(*b).ok());
  ASSERT_TRUE(engine->unregisterLocalMemory(base).ok());
  fake->appVmmFree(base);
}

}  // namespace
}  // namespace tent::testing
