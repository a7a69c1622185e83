// Two processes over the soft fabric, real EAL lcores: this test process is the
// initiator, engine_peer the target.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/support/engine_test_util.h"
#include "tests/support/peer_process.h"

namespace tent::testing {
namespace {

const std::string kDevices = R"(
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0}
      - {name: soft1, numa_node: 0}
    retry_budget_ms: 50
workers: {slice_timeout_ms: 5000, max_slice_retries: 2}
timeouts: {endpoint_destroy_ms: 300}
)";

std::string initiatorYaml(const std::string& extra = "") {
  return "bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: 1000}\n" + kDevices + extra;
}

struct MultiProcess : ::testing::Test {
  void startPeer(size_t bytes, uint32_t seed, const std::string& listen = "127.0.0.1:0",
                 const std::string& extra = "") {
    std::string err;
    ASSERT_TRUE(peer.start(peerExe(), bytes, seed, listen, kDevices + extra, &err)) << err;
  }
  void SetUp() override {
    engine = makeEngine(initiatorYaml());
    ASSERT_NE(engine, nullptr);
    local = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLocal, "*"));
  }
  // `count` requests of `block` bytes at local/remote offsets, waits for all.
  std::vector<TransferStatus> run(SegmentId seg, OpCode op, size_t local_off, uint64_t remote,
                                  size_t block, size_t count) {
    auto b = engine->allocateBatch(count);
    EXPECT_TRUE(b.ok());
    std::vector<Request> reqs(count);
    for (size_t i = 0; i < count; ++i) {
      reqs[i].opcode = op;
      reqs[i].source = local + local_off + i * block;
      reqs[i].target_id = seg;
      reqs[i].target_offset = remote + i * block;
      reqs[i].length = block;
    }
    Status s = engine->submitTransfer(*b, reqs);
    EXPECT_TRUE(s.ok()) << s.toString();
    std::vector<TransferStatus> out;
    for (size_t i = 0; i < count; ++i) out.push_back(waitTask(*engine, *b, i));
    (void)engine->freeBatch(*b);
    return out;
  }
  static constexpr size_t kLocal = 16 << 20;
  PeerProcess peer;
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* local = nullptr;
};

TEST_F(MultiProcess, ReadPeerPatternThenWriteAndReadBack) {
  startPeer(8 << 20, 42);
  auto seg = engine->openSegment(peer.segment);
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  auto bufs = engine->segmentBuffers(*seg);
  ASSERT_TRUE(bufs.ok());
  ASSERT_EQ(bufs->size(), 1u);
  EXPECT_EQ((*bufs)[0].addr, peer.addr);
  // READ the peer's pattern.
  for (auto& st : run(*seg, OpCode::READ, 0, peer.addr, 1 << 20, 8))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(local, 8 << 20, 42), -1);
  uint32_t seed = 100;
  for (size_t block : {size_t{4096}, size_t{65536}, size_t{1} << 20}) {
    for (size_t batch : {size_t{1}, size_t{8}}) {
      size_t bytes = block * batch;
      fillPattern(local, bytes, seed);
      for (auto& st : run(*seg, OpCode::WRITE, 0, peer.addr, block, batch))
        ASSERT_EQ(st.state, TransferState::COMPLETED);
      std::memset(local + (8 << 20), 0, bytes);
      for (auto& st : run(*seg, OpCode::READ, 8 << 20, peer.addr, block, batch)) {
        ASSERT_EQ(st.state, TransferState::COMPLETED);
        EXPECT_EQ(st.transferred_bytes, block);
      }
      ASSERT_EQ(checkPattern(local + (8 << 20), bytes, seed), -1) << block << " x " << batch;
      ++seed;
    }
  }
  EXPECT_TRUE(engine->closeSegment(*seg).ok());
}

TEST_F(MultiProcess, SeveralThreadsEachOwnRegion) {
  startPeer(8 << 20, 1);
  auto seg = engine->openSegment(peer.segment);
  ASSERT_TRUE(seg.ok());
  constexpr int kThreads = 4;
  constexpr size_t kRegion = 1 << 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        uint32_t seed = 1000 + t * 10 + round;
        uint8_t* mine = local + t * kRegion;
        uint8_t* back = local + (8 << 20) + t * kRegion;
        fillPattern(mine, kRegion, seed);
        auto b = *engine->allocateBatch(2);
        Request w{OpCode::WRITE, mine, *seg, peer.addr + t * kRegion, kRegion};
        auto check = [&](bool ok, const char* what) {
          if (ok) return;
          failures++;
          ADD_FAILURE() << "thread " << t << " round " << round << ": " << what;
        };
        check(engine->submitTransfer(b, {&w, 1}).ok(), "submit write");
        auto ws = engine->waitTransfer(b, 0, 10'000'000'000ull);
        check(ws.ok() && ws->state == TransferState::COMPLETED, "write");
        std::memset(back, 0, kRegion);
        Request r{OpCode::READ, back, *seg, peer.addr + t * kRegion, kRegion};
        check(engine->submitTransfer(b, {&r, 1}).ok(), "submit read");
        auto rs = engine->waitTransfer(b, 1, 10'000'000'000ull);
        check(rs.ok() && rs->state == TransferState::COMPLETED,
              rs.ok() ? toString(rs->state).data() : rs.status().toString().c_str());
        check(checkPattern(back, kRegion, seed) == -1, "bytes");
        (void)engine->freeBatch(b);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(MultiProcess, PeerKilledMidTransferThenRestarted) {
  // A modeled 1 Gb/s link: the 32 x 1 MiB submitted below take ~270 ms to cross it,
  // so the peer is killed while most of them are unacknowledged.
  const std::string slow =
      "\nfabric: {provider: soft, soft: {devices: [{name: soft0, link_gbps: 1}], "
      "retry_budget_ms: 50}}\n";
  engine.reset();
  engine = makeEngine(
      "bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: 1000}\n"
      "workers: {slice_timeout_ms: 60000, max_slice_retries: 2}\n"
      "timeouts: {endpoint_destroy_ms: 300}\n" +
      slow);
  ASSERT_NE(engine, nullptr);
  local = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLocal * 2, "*"));
  std::string err;
  ASSERT_TRUE(peer.start(peerExe(), 32 << 20, 5, "127.0.0.1:0", slow, &err)) << err;
  auto seg = engine->openSegment(peer.segment);
  ASSERT_TRUE(seg.ok());
  // Connected and working first.
  for (auto& st : run(*seg, OpCode::READ, 0, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(local, 1 << 20, 5), -1);
  // Kill the peer right after submitting.
  constexpr size_t kTasks = 32;
  std::memset(local, 0, kTasks << 20);
  auto b = *engine->allocateBatch(kTasks);
  std::vector<Request> reqs;
  for (size_t i = 0; i < kTasks; ++i)
    reqs.push_back({OpCode::READ, local + i * (1 << 20), *seg, peer.addr + i * (1 << 20), 1 << 20});
  ASSERT_TRUE(engine->submitTransfer(b, reqs).ok());
  std::string segment_name = peer.segment;
  peer.kill();
  std::vector<uint8_t> expect(kTasks << 20);
  fillPattern(expect.data(), expect.size(), 5);
  size_t failed = 0;
  for (size_t i = 0; i < kTasks; ++i) {
    auto st = waitTask(*engine, b, i, 30);
    ASSERT_NE(st.state, TransferState::PENDING) << "task " << i << " hangs";
    // Unacknowledged WRs fail through the transport (retry-exceeded, reconnects refused),
    // never through the 60 s software timeout.
    EXPECT_NE(st.state, TransferState::TIMEOUT) << "task " << i;
    if (st.state == TransferState::FAILED) ++failed;
    if (st.state == TransferState::COMPLETED) {  // acknowledged before the kill: all its bytes
      EXPECT_EQ(std::memcmp(local + (i << 20), expect.data() + (i << 20), 1 << 20), 0) << i;
    }
  }
  // The last task's WR is the last to cross the link: it is unacknowledged at the kill.
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(waitTask(*engine, b, kTasks - 1).state, TransferState::FAILED);
  (void)engine->freeBatch(b);

  // Restart on the same port; the next transfer to the same segment succeeds.
  ASSERT_TRUE(peer.start(peerExe(), 32 << 20, 6, segment_name, slow, &err)) << err;
  ASSERT_EQ(peer.segment, segment_name);
  auto again = engine->openSegment(segment_name);
  ASSERT_TRUE(again.ok());
  fillPattern(local, 1 << 20, 77);
  for (auto& st : run(*again, OpCode::WRITE, 0, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  std::memset(local + (8 << 20), 0, 1 << 20);
  for (auto& st : run(*again, OpCode::READ, 8 << 20, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(local + (8 << 20), 1 << 20, 77), -1);
  // And the peer's own pattern beyond what we wrote is intact.
  for (auto& st : run(*again, OpCode::READ, 0, peer.addr + (1 << 20), 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  std::vector<uint8_t> fresh(2 << 20);
  fillPattern(fresh.data(), fresh.size(), 6);
  EXPECT_EQ(std::memcmp(local, fresh.data() + (1 << 20), 1 << 20), 0);
}

// A batch whose target dies under it delivers no notification: the initiator sees the
// batch FAILED and counts the notification dropped, and the target restarted at the
// same address never receives it; a fresh notification afterwards arrives alone.
TEST_F(MultiProcess, PeerKilledMidBatchGetsNoNotificationNotEvenAfterItRestarts) {
  // The 1 Gb/s link of PeerKilledMidTransferThenRestarted: 32 x 1 MiB take ~270 ms.
  const std::string slow =
      "\nfabric: {provider: soft, soft: {devices: [{name: soft0, link_gbps: 1}], "
      "retry_budget_ms: 50}}\n";
  engine.reset();
  engine = makeEngine(
      "bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: 1000}\n"
      "workers: {slice_timeout_ms: 60000, max_slice_retries: 2}\n"
      "timeouts: {endpoint_destroy_ms: 300}\n" +
      slow);
  ASSERT_NE(engine, nullptr);
  local = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLocal * 2, "*"));
  std::string err;
  ASSERT_TRUE(peer.start(peerExe(), 32 << 20, 5, "127.0.0.1:0", slow, &err)) << err;
  auto seg = engine->openSegment(peer.segment);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(engine->sendNotification(*seg, "hello").ok());  // connected, channel works
  ASSERT_EQ(peer.command("notifications 60000"), "NOTES 1 hello");
  constexpr size_t kTasks = 32;
  fillPattern(local, kTasks << 20, 8);
  auto b = *engine->allocateBatch(kTasks);
  std::vector<Request> reqs;
  for (size_t i = 0; i < kTasks; ++i)
    reqs.push_back(
        {OpCode::WRITE, local + i * (1 << 20), *seg, peer.addr + i * (1 << 20), 1 << 20});
  ASSERT_TRUE(engine->submitTransfer(b, reqs, "stale: the batch failed").ok());
  const std::string segment_name = peer.segment;
  peer.kill();
  Result<TransferStatus> st = Status::Internal("not polled");
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < end;) {
    st = engine->getBatchTransferStatus(b);
    if (!st.ok() || st->state != TransferState::PENDING) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(st.ok()) << st.status().toString();
  EXPECT_EQ(st->state, TransferState::FAILED);
  EXPECT_TRUE(engine->freeBatch(b).ok());
  EngineStats s = engine->stats();
  EXPECT_EQ(s.notify.dropped_batches, 1u);
  EXPECT_EQ(s.notify.sent, 1u);  // "hello" only

  ASSERT_TRUE(peer.start(peerExe(), 32 << 20, 6, segment_name, slow, &err)) << err;
  auto again = engine->openSegment(segment_name);
  ASSERT_TRUE(again.ok());
  Status sent = Status::Unavailable("not sent");
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < end && !sent.ok();) {
    sent = engine->sendNotification(*again, "fresh");  // may meet the old endpoint retiring
    if (!sent.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(sent.ok()) << sent.toString();
  // The fresh one arrives, and alone: the stale one went nowhere.
  EXPECT_EQ(peer.command("notifications 60000"), "NOTES 1 fresh");
  EXPECT_EQ(peer.command("notifications 100"), "NOTES 0 ");
  EXPECT_EQ(engine->stats().notify.dropped_batches, 1u);
}

TEST_F(MultiProcess, TargetRangeBeyondPeerBufferIsRejected) {
  startPeer(1 << 20, 3);
  auto seg = engine->openSegment(peer.segment);
  ASSERT_TRUE(seg.ok());
  auto b = *engine->allocateBatch(1);
  Request r{OpCode::WRITE, local, *seg, peer.addr + (1 << 20) - 100, 200};
  EXPECT_EQ(engine->submitTransfer(b, {&r, 1}).code(), StatusCode::kOutOfRange);
  // The peer's bytes stay as they were.
  for (auto& st : run(*seg, OpCode::READ, 0, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(local, 1 << 20, 3), -1);
}

// The metadata blob between two processes (issue 25): the peer's localMetadata()
// crosses a pipe (a serving stack's own side channel), addRemoteMetadata opens the
// segment from it, and no descriptor is fetched from the peer's control port (the
// opener's counter stays where it was); the bytes read and written are verified.
TEST_F(MultiProcess, MetadataBlobOpensThePeerWithoutADescriptorFetch) {
  char path[] = "/tmp/tent-mp-blob-secret-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string secret(64, 'k');
  ASSERT_EQ(::write(fd, secret.data(), secret.size()), static_cast<ssize_t>(secret.size()));
  ::close(fd);
  ::chmod(path, 0600);
  const std::string auth = std::string(", auth: {secret_file: \"") + path + "\"}";
  std::string err;
  ASSERT_TRUE(peer.start(peerExe(), 4 << 20, 31, "127.0.0.1:0", kDevices, &err, auth)) << err;
  // This process's engine with the same secret (the blob is signed with it).
  engine.reset();
  engine = makeEngine("bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: 1000" + auth +
                      "}\n" + kDevices);
  ASSERT_NE(engine, nullptr);
  local = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLocal, "*"));
  const std::string hex = peer.command("metadata");
  ASSERT_FALSE(hex.empty());
  ASSERT_EQ(hex.size() % 2, 0u) << hex;
  std::string blob;
  for (size_t i = 0; i < hex.size(); i += 2)
    blob.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  const uint64_t fetches = engine->stats().control.descriptor_fetches;
  auto seg = engine->addRemoteMetadata(blob);
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  auto bufs = engine->segmentBuffers(*seg);
  ASSERT_TRUE(bufs.ok());
  ASSERT_EQ(bufs->size(), 1u);
  EXPECT_EQ((*bufs)[0].addr, peer.addr);
  for (auto& st : run(*seg, OpCode::READ, 0, peer.addr, 1 << 20, 4))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(local, 4 << 20, 31), -1);
  fillPattern(local, 1 << 20, 32);
  for (auto& st : run(*seg, OpCode::WRITE, 0, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  std::memset(local + (8 << 20), 0, 1 << 20);
  for (auto& st : run(*seg, OpCode::READ, 8 << 20, peer.addr, 1 << 20, 1))
    ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(local + (8 << 20), 1 << 20, 32), -1);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.control.descriptor_fetches, fetches) << "a descriptor was fetched from the peer";
  EXPECT_EQ(s.fleet.blobs_added, 1u);
  // The same blob again names the segment already open.
  EXPECT_EQ(*engine->addRemoteMetadata(blob), *seg);
  EXPECT_EQ(engine->stats().control.descriptor_fetches, fetches);
  ::unlink(path);
}

}  // namespace
}  // namespace tent::testing
