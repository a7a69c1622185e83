// GPU memory kinds in the engine, through the fake CUDA driver: a GPU pointer
// registered with location "*" is found to be device memory, placed on its topology
// GPU (by PCI address, not by CUDA's numbering), registered only on the NICs that
// can reach it, and split into one buffer per physical allocation (VMM chunks).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/cuda_memory.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::testing {
namespace {

using cuda::testing::FakeCuda;
using cuda::testing::FakeCudaOptions;

constexpr size_t kMiB = size_t{1} << 20;

// tests/topology/data/two_socket.xml: socket 0 has GPU 0000:03:00.0 (topology cuda:0)
// under one switch with NIC 0000:04:00.0; socket 1 has GPUs 83:00.0 and 84:00.0
// (cuda:1, cuda:2) and NIC 88:00.0. Two soft devices stand in for those two NICs.
std::string twoSocketYaml() {
  const char* src = std::getenv("TENT_TEST_SRCDIR");
  const std::string xml = std::string(src ? src : ".") + "/tests/topology/data/two_socket.xml";
  return R"(
eal: {mode: manual}
topology: {xml_file: ")" +
         xml + R"("}
fabric:
  provider: soft
  soft:
    devices:
      - {name: nic_s0, pci: "0000:04:00.0"}
      - {name: nic_s1, pci: "0000:88:00.0"}
    retry_budget_ms: 50
lcores:
  - pollers: ["rail:*"]
  - pollers: [background]
workers: {block_size: 65536, slice_timeout_ms: 5000}
bootstrap: {listen: "127.0.0.1:0", connect_timeout_ms: 1000}
)";
}

FakeCudaOptions gpuAt(const std::string& pci) {
  FakeCudaOptions o;
  o.gpus[0].pci = pci;
  return o;
}

const rdma::LocalBuffer* bufferAt(TransferEngineImpl& e, const void* p) {
  auto table = e.transport().localMemory().table();
  const auto addr = reinterpret_cast<uint64_t>(p);
  for (const auto& b : table->buffers)
    if (b->addr == addr) return b.get();
  return nullptr;
}

TEST(GpuMemory, AGpuPointerIsPlacedOnItsGpuAndRegisteredOnlyWhereANicReachesIt) {
  FakeCuda fake(gpuAt("0000:03:00.0"));  // socket 0
  auto engine = makeEngine(twoSocketYaml());
  ASSERT_NE(engine, nullptr);
  void* p = fake.appMalloc(0, kMiB);
  ASSERT_TRUE(engine->registerLocalMemory(p, kMiB).ok());
  auto infos = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(infos.ok());
  ASSERT_EQ(infos->size(), 1u);
  EXPECT_EQ((*infos)[0].location, "cuda:0");
  const rdma::LocalBuffer* b = bufferAt(*engine, p);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->gpu_device, 0);
  EXPECT_EQ(b->device_mask, 0b01u) << "the NIC on the other socket must not hold an MR";
  EXPECT_NE(b->rkeys[0], 0u);
  EXPECT_EQ(b->rkeys[1], 0u);
  EXPECT_EQ(b->mrs[1], nullptr);
  auto d = engine->transport().localMemory().descriptor();
  ASSERT_EQ(d.buffers.size(), 1u);
  EXPECT_EQ(d.buffers[0].regions[0].rank0, std::vector<uint16_t>{0});
  ASSERT_TRUE(engine->unregisterLocalMemory(p).ok());
  fake.appFree(p);
}

TEST(GpuMemory, CudaNumbersAreJoinedToTheTopologyByPciAddress) {
  // CUDA's device 0 is the topology's third GPU (84:00.0, socket 1).
  FakeCuda fake(gpuAt("0000:84:00.0"));
  auto engine = makeEngine(twoSocketYaml());
  ASSERT_NE(engine, nullptr);
  void* p = fake.appMalloc(0, kMiB);
  ASSERT_TRUE(engine->registerLocalMemory(p, kMiB, "cuda:0").ok());
  auto infos = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(infos.ok());
  EXPECT_EQ((*infos)[0].location, "cuda:2");
  EXPECT_EQ(bufferAt(*engine, p)->device_mask, 0b10u);
  ASSERT_TRUE(engine->unregisterLocalMemory(p).ok());
  fake.appFree(p);
}

TEST(GpuMemory, AGpuTheTopologyDoesNotKnowIsRegisteredEverywhere) {
  FakeCuda fake(gpuAt("0000:c1:00.0"));
  auto engine = makeEngine(twoSocketYaml());
  ASSERT_NE(engine, nullptr);
  void* p = fake.appMalloc(0, kMiB);
  ASSERT_TRUE(engine->registerLocalMemory(p, kMiB).ok());
  EXPECT_EQ((*engine->segmentBuffers(LOCAL_SEGMENT_ID))[0].location, "cuda:0");
  EXPECT_EQ(bufferAt(*engine, p)->device_mask, 0b11u);
  ASSERT_TRUE(engine->unregisterLocalMemory(p).ok());
  fake.appFree(p);
}

TEST(GpuMemory, VmmChunksAreRegisteredOneBufferEachAndUnregisteredTogether) {
  FakeCuda fake;
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  auto* base = static_cast<char*>(fake.appVmm(0, {2 * kMiB, 4 * kMiB, 2 * kMiB}));
  ASSERT_TRUE(engine->registerLocalMemory(base + kMiB, 6 * kMiB).ok());
  auto infos = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(infos.ok());
  ASSERT_EQ(infos->size(), 3u);
  EXPECT_EQ((*infos)[0].addr, reinterpret_cast<uint64_t>(base + kMiB));
  EXPECT_EQ((*infos)[0].length, kMiB);
  EXPECT_EQ((*infos)[1].addr, reinterpret_cast<uint64_t>(base + 2 * kMiB));
  EXPECT_EQ((*infos)[1].length, 4 * kMiB);
  EXPECT_EQ((*infos)[2].length, kMiB);
  // A second registration may not overlap any of the pieces.
  EXPECT_EQ(engine->registerLocalMemory(base + 3 * kMiB, kMiB).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(engine->unregisterLocalMemory(base + 2 * kMiB).code(), StatusCode::kNotFound);
  ASSERT_TRUE(engine->unregisterLocalMemory(base + kMiB).ok());
  EXPECT_EQ(engine->segmentBuffers(LOCAL_SEGMENT_ID)->size(), 0u);
  fake.appVmmFree(base);
}

TEST(GpuMemory, ALocationThatContradictsTheMemoryIsRefused) {
  cuda::testing::FakeCudaOptions two;
  two.gpus.resize(2);
  FakeCuda fake(two);
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  void* p = fake.appMalloc(0, kMiB);
  Status s = engine->registerLocalMemory(p, kMiB, "cuda:1");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("on cuda:0"), std::string::npos) << s.toString();
  std::vector<char> host(4096);
  s = engine->registerLocalMemory(host.data(), host.size(), "cuda:0");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.toString();
  EXPECT_EQ(engine->segmentBuffers(LOCAL_SEGMENT_ID)->size(), 0u);
  fake.appFree(p);
}

TEST(GpuMemory, AGpuWithoutGpuDirectRdmaIsRefusedOnEveryProvider) {
  FakeCudaOptions o;
  o.gpus[0].gdr = false;
  FakeCuda fake(o);
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  void* p = fake.appMalloc(0, kMiB);
  Status s = engine->registerLocalMemory(p, kMiB);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("GPUDirect RDMA"), std::string::npos) << s.toString();
  EXPECT_EQ(engine->segmentBuffers(LOCAL_SEGMENT_ID)->size(), 0u);
  EXPECT_FALSE(engine->allocateLocalMemory(kMiB, "cuda:0").ok());
  EXPECT_EQ(fake.live().physical, 0);
  EXPECT_EQ(fake.live().context_refs, 0);
  fake.appFree(p);
}

// Each registration of VMM memory on soft exports a descriptor for peers; it goes
// with the registration.
TEST(GpuMemory, RegistrationChurnReturnsEveryExportedDescriptor) {
  FakeCuda fake;
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  auto* base = static_cast<char*>(fake.appVmm(0, {2 * kMiB, 2 * kMiB}));
  auto openFds = [] {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(engine->registerLocalMemory(base, 4 * kMiB).ok());  // warm: lazy state
  ASSERT_TRUE(engine->unregisterLocalMemory(base).ok());
  const size_t before = openFds();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(engine->registerLocalMemory(base, 4 * kMiB).ok());
    ASSERT_TRUE(engine->unregisterLocalMemory(base).ok());
  }
  EXPECT_EQ(openFds(), before);
  fake.appVmmFree(base);
}

TEST(GpuMemory, HostMemoryWithCudaLoadedStaysHostMemory) {
  FakeCuda fake;
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  std::vector<char> host(1 << 16);
  ASSERT_TRUE(engine->registerLocalMemory(host.data(), host.size()).ok());
  const rdma::LocalBuffer* b = bufferAt(*engine, host.data());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->gpu_device, -1);
  EXPECT_EQ(b->device_mask, ~0ull);
  EXPECT_NE((*engine->segmentBuffers(LOCAL_SEGMENT_ID))[0].location.rfind("cuda:", 0), 0u);
}

}  // namespace
}  // namespace tent::testing
