// Bootstrap compatibility of the direct QP: a peer that advertises none, and the
// duplicate-bootstrap rule that compares direct_qp_num.
#include <gtest/gtest.h>

#include "tests/support/direct_test_util.h"
#include "tests/support/raw_control.h"
#include "wire/bootstrap.h"
#include "wire/segment_descriptor.h"

namespace tent::testing {
namespace {

using DirectCompat = DirectFixture;

TEST_F(DirectCompat, PeerWithoutDirectQpGetsWorkerPath) {
  auto legacy = makeEngine(simYaml("direct: {create_qp: false}\n"));
  ASSERT_NE(legacy, nullptr);
  uint8_t* remote = static_cast<uint8_t*>(*legacy->allocateLocalMemory(1 << 20, "cpu:0"));
  auto seg = engine->openSegment(legacy->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  ASSERT_TRUE(waitEndpoints(*seg));
  EXPECT_EQ(endpoint(0, *seg)->directQp(), nullptr);  // the peer advertised 0
  for (int i = 0; i < 3; ++i) {
    fillPattern(src, 4096, 20 + i);
    BatchId b = submitOne(req(OpCode::WRITE, 0, 4096, IntentType::FOREGROUND_GET, 0, *seg, remote));
    EXPECT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);
    EXPECT_EQ(checkPattern(remote, 4096, 20 + i), -1);
  }
  EXPECT_EQ(direct().succeeded, 0u);
  EXPECT_EQ(direct().fallback_endpoint_not_ready, 3u);
  // The local loopback endpoints still have direct QPs.
  ASSERT_TRUE(waitEndpoints());
  EXPECT_NE(endpoint(0)->directQp(), nullptr);
}

metadata::BootstrapMessage bootstrapTo(const metadata::SegmentDescriptor& peer, uint32_t direct,
                                       uint64_t generation) {
  metadata::BootstrapMessage m;
  m.initiator_segment = "127.0.0.1:1";
  m.initiator_instance = 4242;
  m.local_device = "soft0";
  m.peer_device = "soft0";
  m.port = peer.devices[0].port;
  m.generation = generation;
  m.data_qp_nums = {1001, 1002};
  m.direct_qp_num = direct;
  return m;
}

using metadata::FrameType;

Result<metadata::BootstrapMessage> send(const std::string& to,
                                        const metadata::BootstrapMessage& m) {
  auto reply = test::oneShot(to, FrameType::kBootstrap, metadata::encodeBootstrap(m));
  if (!reply.ok()) return reply.status();
  if (reply->type == FrameType::kError) return metadata::parseError(reply->payload);
  return metadata::parseBootstrap(reply->payload);
}

TEST_F(DirectCompat, DuplicateBootstrapReusesOnlyWhenDirectQpMatches) {
  // A v1 asker (empty GET_DESCRIPTOR payload) gets a v1 descriptor.
  auto got = test::oneShot(engine->segmentName(), FrameType::kGetDescriptor, {});
  ASSERT_TRUE(got.ok()) << got.status().toString();
  ASSERT_EQ(got->type, FrameType::kDescriptor);
  ASSERT_GE(got->payload.size(), 6u);
  EXPECT_EQ(got->payload[4], metadata::kDescriptorVersionV1);
  auto desc = metadata::parseDescriptor(got->payload);
  ASSERT_TRUE(desc.ok());
  auto first = send(engine->segmentName(), bootstrapTo(*desc, 900, 1));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_NE(first->direct_qp_num, 0u);
  EXPECT_EQ(first->data_qp_nums.size(), 2u);
  auto dup = send(engine->segmentName(), bootstrapTo(*desc, 900, 1));
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->data_qp_nums, first->data_qp_nums);  // same endpoint
  EXPECT_EQ(dup->direct_qp_num, first->direct_qp_num);
  auto changed = send(engine->segmentName(), bootstrapTo(*desc, 901, 1));
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->data_qp_nums, first->data_qp_nums);  // a new endpoint
  EXPECT_NE(changed->direct_qp_num, first->direct_qp_num);
  auto none = send(engine->segmentName(), bootstrapTo(*desc, 0, 1));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->direct_qp_num, 0u);  // we answer without a direct QP
  // A v1 message (no direct_qp_num field) is accepted, answered in v1, no direct QP.
  auto reply = test::oneShot(engine->segmentName(), FrameType::kBootstrap,
                             metadata::encodeBootstrap(bootstrapTo(*desc, 900, 2), 1));
  ASSERT_TRUE(reply.ok()) << reply.status().toString();
  ASSERT_EQ(reply->type, FrameType::kBootstrapReply);
  auto v1 = metadata::parseBootstrap(reply->payload);
  ASSERT_TRUE(v1.ok()) << v1.status().toString();
  EXPECT_EQ(v1->version, metadata::kBootstrapVersionV1);
  EXPECT_EQ(v1->direct_qp_num, 0u);
  // Malformed bootstrap bytes: an error answer, and the listener keeps serving.
  auto junk = test::oneShot(engine->segmentName(), FrameType::kBootstrap, {1, 2, 3});
  ASSERT_TRUE(junk.ok());
  EXPECT_EQ(junk->type, FrameType::kError);
  EXPECT_TRUE(test::oneShot(engine->segmentName(), FrameType::kGetDescriptor, {}).ok());
}

// Bootstrap v3: the descriptor advertises the newest bootstrap we read, and an answer
// comes in min(the request's version, ours): an older peer never sees an extension, a
// newer one gets ours.
TEST_F(DirectCompat, TheAnswerComesInTheRequestsVersionAtMostOurs) {
  auto got = test::oneShot(engine->segmentName(), FrameType::kGetDescriptor,
                           metadata::encodeDescriptorRequest(metadata::kDescriptorVersion));
  ASSERT_TRUE(got.ok()) << got.status().toString();
  auto desc = metadata::parseDescriptor(got->payload);
  ASSERT_TRUE(desc.ok()) << desc.status().toString();
  EXPECT_EQ(desc->max_bootstrap_version, metadata::kBootstrapVersion);
  for (uint16_t version : {uint16_t{2}, uint16_t{3}, uint16_t{4}}) {
    auto m = bootstrapTo(*desc, 700 + version, 1);
    m.extensions.push_back({999, {1, 2}});  // a tag nobody knows (dropped below v3)
    auto reply = test::oneShot(engine->segmentName(), FrameType::kBootstrap,
                               metadata::encodeBootstrap(m, version));
    ASSERT_TRUE(reply.ok()) << reply.status().toString();
    ASSERT_EQ(reply->type, FrameType::kBootstrapReply) << "version " << version;
    auto answer = metadata::parseBootstrap(reply->payload);
    ASSERT_TRUE(answer.ok()) << answer.status().toString();
    EXPECT_EQ(answer->version, metadata::bootstrapVersionFor(version));
    EXPECT_NE(answer->direct_qp_num, 0u);
    if (version < 3) {
      EXPECT_TRUE(answer->extensions.empty());
    }
  }
}

}  // namespace
}  // namespace tent::testing
