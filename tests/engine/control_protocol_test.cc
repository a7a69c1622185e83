#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "closed_port.h"
#include "engine/metadata/control_protocol.h"

namespace tent::metadata {
namespace {

TEST(ControlProtocol, SplitHostPort) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(splitHostPort("127.0.0.1:80", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 80);
  EXPECT_FALSE(splitHostPort("nohost", &host, &port).ok());
  EXPECT_FALSE(splitHostPort(":80", &host, &port).ok());
  EXPECT_FALSE(splitHostPort("h:", &host, &port).ok());
  EXPECT_FALSE(splitHostPort("h:99999", &host, &port).ok());
  EXPECT_FALSE(splitHostPort("h:8x", &host, &port).ok());
}

TEST(ControlProtocol, RequestReply) {
  auto server = ControlServer::start("127.0.0.1:0", [](const ControlFrame& req) {
    ControlFrame reply{ControlType::kDescriptor, req.payload};
    reply.payload.push_back(42);
    return reply;
  });
  ASSERT_TRUE(server.ok()) << server.status().toString();
  ControlFrame req{ControlType::kGetDescriptor, {1, 2, 3}};
  auto reply = controlRequest((*server)->name(), req, 2000);
  ASSERT_TRUE(reply.ok()) << reply.status().toString();
  EXPECT_EQ(reply->type, ControlType::kDescriptor);
  EXPECT_EQ(reply->payload, (std::vector<uint8_t>{1, 2, 3, 42}));
}

TEST(ControlProtocol, ErrorFramesBecomeStatus) {
  auto server = ControlServer::start("127.0.0.1:0", [](const ControlFrame&) {
    std::string m = "no such device";
    return ControlFrame{ControlType::kError, std::vector<uint8_t>(m.begin(), m.end())};
  });
  ASSERT_TRUE(server.ok());
  auto reply = controlRequest((*server)->name(), ControlFrame{ControlType::kBootstrap, {}}, 2000);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("no such device"), std::string::npos);
}

TEST(ControlProtocol, UnreachablePeerIsUnavailable) {
  const std::string closed = test::closedLoopbackAddress();
  ASSERT_FALSE(closed.empty());
  auto reply = controlRequest(closed, ControlFrame{ControlType::kGetDescriptor, {}}, 1000);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
}

TEST(ControlProtocol, GarbageClientDoesNotStopTheServer) {
  auto server = ControlServer::start("127.0.0.1:0", [](const ControlFrame& req) {
    return ControlFrame{ControlType::kDescriptor, req.payload};
  });
  ASSERT_TRUE(server.ok());
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(splitHostPort((*server)->name(), &host, &port).ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  (void)!::write(fd, junk, sizeof junk);
  ::close(fd);
  auto reply =
      controlRequest((*server)->name(), ControlFrame{ControlType::kGetDescriptor, {7}}, 3000);
  ASSERT_TRUE(reply.ok()) << reply.status().toString();
  EXPECT_EQ(reply->payload, std::vector<uint8_t>{7});
}

}  // namespace
}  // namespace tent::metadata
