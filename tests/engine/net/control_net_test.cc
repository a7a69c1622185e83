// The control plane's network pieces on their own: addresses, the listener and its
// limits (connection cap, frame limits, deadlines), one-shot v1 requests, sessions
// and their authentication, frame tags. A real event loop on its own thread; test
// clients are the engine's ClientSession or a raw blocking socket.
#include <gtest/gtest.h>

#include <atomic>

#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "net/address.h"
#include "net/client.h"
#include "net/server.h"
#include "tests/support/raw_control.h"
#include "wire/bootstrap.h"

namespace tent::control {
namespace {

using metadata::FrameType;
using test::RawControl;

const std::vector<uint8_t> kDescriptor = {'d', 'e', 's', 'c'};

Secret secretA() {
  return Secret::fromBytes(std::string(40, 'a'));
}

// Waits (bounded) for a condition the server reaches asynchronously.
template <typename Pred>
bool eventually(Pred pred, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}
Secret secretB() {
  return Secret::fromBytes(std::string(40, 'b'));
}

struct Handler : ServerHandler {
  std::vector<uint8_t> descriptorFor(uint16_t) override { return kDescriptor; }
  Result<metadata::BootstrapMessage> acceptBootstrap(ServerSession* s,
                                                     const metadata::BootstrapMessage& r) override {
    metadata::BootstrapMessage answer = r;
    answer.generation += 1;
    sessions.push_back(s ? s->id() : 0);
    return answer;
  }
  // A session that bootstrapped holds an endpoint, as the engine's passive endpoints.
  bool holdsEndpoints(const ServerSession& s) override {
    return std::find(sessions.begin(), sessions.end(), s.id()) != sessions.end();
  }
  void release(ServerSession&, const metadata::ReleaseMessage& m) override {
    released.push_back(m.generation);
  }
  void sessionClosed(ServerSession& s) override { closed.push_back(s.id()); }
  std::vector<uint64_t> sessions, closed, released;
};

struct ControlNet : ::testing::Test {
  void start(ServerOptions options, const std::string& host = "127.0.0.1") {
    loop = std::move(EventLoop::create()).value();
    auto s = ControlServer::create(*loop, host, 0, std::move(options), handler, stats);
    ASSERT_TRUE(s.ok()) << s.status().toString();
    server = std::move(s).value();
    ASSERT_TRUE(server->start().ok());
    loop->start("test-loop");
    address = joinHostPort(host, server->port());
  }
  template <typename Fn>
  auto onLoop(Fn fn) {
    std::promise<decltype(fn())> p;
    auto f = p.get_future();
    loop->post([&] { p.set_value(fn()); });
    return f.get();
  }
  void TearDown() override {
    if (!loop) return;
    onLoop([&] {
      clients.clear();
      server.reset();
      return 0;
    });
    loop->stop();
    loop->join();
  }
  // Opens a ClientSession with `secret`; returns the status it came up (or down) with.
  Status session(const Secret& secret) {
    auto up = std::make_shared<std::promise<Status>>();
    auto future = up->get_future();
    onLoop([&] {
      auto l = std::make_unique<Listener>(up);
      ClientOptions o;
      o.connect_timeout_ns = 2'000'000'000;
      o.io_timeout_ns = 2'000'000'000;
      o.keepalive_ns = 50'000'000;
      std::string host;
      uint16_t port = 0;
      EXPECT_TRUE(splitHostPort(address, &host, &port).ok());
      auto a = resolve(host, port);
      clients.push_back(std::make_unique<ClientSession>(
          *loop, address, *a, secrets.emplace_back(secret), o, stats, *l));
      listeners.push_back(std::move(l));
      clients.back()->start();
      return 0;
    });
    return future.get();
  }
  struct Listener : ClientSession::Listener {
    explicit Listener(std::shared_ptr<std::promise<Status>> p) : up(std::move(p)) {}
    void onSessionUp(ClientSession&, std::vector<uint8_t> d) override {
      descriptor = d;
      if (!done) up->set_value(Status::OK());
      done = true;
    }
    void onDescriptorUpdate(ClientSession&, std::vector<uint8_t> d) override {
      updates.push_back(d);
    }
    void onSessionDown(ClientSession&, const Status& why) override {
      down = why;
      if (!done) up->set_value(why);
      done = true;
    }
    std::shared_ptr<std::promise<Status>> up;
    bool done = false;
    std::vector<uint8_t> descriptor;
    std::vector<std::vector<uint8_t>> updates;
    Status down;
  };

  Handler handler;
  ControlCounters stats;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<ControlServer> server;
  std::string address;
  std::deque<Secret> secrets;
  std::vector<std::unique_ptr<Listener>> listeners;
  std::vector<std::unique_ptr<ClientSession>> clients;
};

TEST(ControlAddress, SplitHostPortTakesIpv4NamesAndBracketedIpv6) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(splitHostPort("127.0.0.1:80", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 80);
  EXPECT_TRUE(splitHostPort("[::1]:17800", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 17800);
  EXPECT_TRUE(splitHostPort("node-7.cluster:1", &host, &port).ok());
  for (const char* bad : {"nohost", ":80", "h:", "h:99999", "h:8x", "::1:80", "[::1]80", "[::1"})
    EXPECT_FALSE(splitHostPort(bad, &host, &port).ok()) << bad;
  EXPECT_EQ(joinHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(joinHostPort("10.0.0.1", 5), "10.0.0.1:5");
}

TEST_F(ControlNet, SessionWithoutSecretGetsTheDescriptorAndBootstraps) {
  start({});
  ASSERT_TRUE(session(Secret()).ok());
  EXPECT_EQ(listeners[0]->descriptor, kDescriptor);
  metadata::BootstrapMessage m;
  m.initiator_segment = "x:1";
  m.local_device = "d0";
  m.peer_device = "d1";
  m.generation = 5;
  m.data_qp_nums = {7};
  std::promise<Result<ClientSession::Reply>> reply;
  onLoop([&] {
    clients[0]->request(FrameType::kBootstrap, metadata::encodeBootstrap(m),
                        [&](Result<ClientSession::Reply> r) { reply.set_value(std::move(r)); });
    return 0;
  });
  auto r = reply.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->type, FrameType::kBootstrapReply);
  EXPECT_EQ(metadata::parseBootstrap(r->payload)->generation, 6u);
  EXPECT_NE(handler.sessions.at(0), 0u);  // bound to its session
}

TEST_F(ControlNet, MatchingSecretsAuthenticateBothWays) {
  ServerOptions o;
  o.secret = secretA();
  start(o);
  EXPECT_TRUE(session(secretA()).ok());
  EXPECT_EQ(listeners[0]->descriptor, kDescriptor);
  EXPECT_EQ(stats.auth_failures.load(), 0u);
}

TEST_F(ControlNet, WrongOrMissingSecretFailsNamingAuthentication) {
  ServerOptions o;
  o.secret = secretA();
  start(o);
  Status wrong = session(secretB());
  EXPECT_EQ(wrong.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.message().find("authentication"), std::string::npos) << wrong.toString();
  Status none = session(Secret());
  EXPECT_EQ(none.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(none.message().find("authentication"), std::string::npos) << none.toString();
  EXPECT_TRUE(listeners[0]->descriptor.empty());
  EXPECT_TRUE(listeners[1]->descriptor.empty());
}

TEST_F(ControlNet, ClientWithSecretRefusesAServerWithout) {
  start({});
  Status s = session(secretA());
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("does not authenticate"), std::string::npos) << s.toString();
}

TEST_F(ControlNet, RawClientNeverGetsADescriptorFromASecretServer) {
  ServerOptions o;
  o.secret = secretA();
  start(o);
  auto one = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->type, FrameType::kError);
  EXPECT_NE(std::string(one->payload.begin(), one->payload.end()).find("authentication"),
            std::string::npos);
  RawControl c;  // HELLO, then a request instead of AUTH
  ASSERT_TRUE(c.connect(address));
  metadata::Hello h;
  ASSERT_TRUE(c.send(FrameType::kHello, metadata::encodeHello(h)));
  auto challenge = c.recv();
  ASSERT_TRUE(challenge.ok());
  EXPECT_EQ(challenge->type, FrameType::kChallenge);
  auto refused = c.request(FrameType::kGetDescriptor, {});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->type, FrameType::kError);
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_TRUE(eventually([&] { return stats.auth_failures.load() >= 2; }));
}

TEST_F(ControlNet, TamperedFrameAfterAuthenticationClosesTheSession) {
  ServerOptions o;
  o.secret = secretA();
  start(o);
  RawControl c;
  ASSERT_TRUE(c.connect(address));
  ASSERT_TRUE(c.handshake(secretA()).ok());
  auto d = c.request(FrameType::kGetDescriptor, metadata::encodeDescriptorRequest(2));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, FrameType::kDescriptor);
  std::vector<uint8_t> forged(metadata::kMacBytes, 0);  // a KEEPALIVE with a made-up tag
  uint8_t hdr[metadata::kFrameHeaderBytes];
  metadata::encodeFrameHeader(FrameType::kKeepalive, metadata::kMacBytes, hdr);
  ASSERT_TRUE(c.sendBytes(hdr, sizeof hdr) && c.sendBytes(forged.data(), forged.size()));
  EXPECT_TRUE(c.closedByPeer());
}

TEST_F(ControlNet, OneShotV1RequestsAreServedWithoutASecret) {
  start({});
  auto d = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, FrameType::kDescriptor);
  EXPECT_EQ(d->payload, kDescriptor);
  metadata::BootstrapMessage m;
  m.initiator_segment = "x:1";
  m.local_device = "d0";
  m.peer_device = "d1";
  m.data_qp_nums = {1};
  auto b = test::oneShot(address, FrameType::kBootstrap, metadata::encodeBootstrap(m, 1));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->type, FrameType::kBootstrapReply);
  EXPECT_EQ(metadata::parseBootstrap(b->payload)->version, 1u);  // answered in v1
  EXPECT_EQ(handler.sessions.back(), 0u);                        // not bound to a session
}

TEST_F(ControlNet, GarbageAndOversizedFramesAreRejectedAndTheListenerKeepsServing) {
  start({});
  {
    RawControl c;
    ASSERT_TRUE(c.connect(address));
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_TRUE(c.sendBytes(junk, sizeof junk));
    EXPECT_TRUE(c.closedByPeer());
  }
  {
    RawControl c;  // a 1 MiB frame before any handshake
    ASSERT_TRUE(c.connect(address));
    uint8_t hdr[metadata::kFrameHeaderBytes];
    metadata::encodeFrameHeader(FrameType::kHello, 1u << 20, hdr);
    ASSERT_TRUE(c.sendBytes(hdr, sizeof hdr));
    EXPECT_TRUE(c.closedByPeer());
  }
  EXPECT_TRUE(eventually([&] { return stats.frames_rejected.load() >= 2; }));
  auto d = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, FrameType::kDescriptor);
}

TEST_F(ControlNet, SlowSenderAndSilentConnectionAreClosedByTheirDeadlines) {
  ServerOptions o;
  o.io_timeout_ns = 200'000'000;
  o.handshake_timeout_ns = 300'000'000;
  start(o);
  RawControl slow, silent;
  ASSERT_TRUE(slow.connect(address));
  ASSERT_TRUE(silent.connect(address));
  const uint8_t half[3] = {0x54, 0x43, 0x54};  // three bytes of a header, then nothing
  ASSERT_TRUE(slow.sendBytes(half, sizeof half));
  EXPECT_TRUE(slow.closedByPeer(10'000));
  EXPECT_TRUE(silent.closedByPeer(10'000));
  EXPECT_TRUE(eventually([&] { return stats.deadline_closures.load() >= 2; }));
}

// A session that bootstrapped over a raw connection (it holds an endpoint).
void bootstrapOn(RawControl& c) {
  metadata::BootstrapMessage m;
  m.initiator_segment = "x:1";
  m.local_device = "d0";
  m.peer_device = "d1";
  m.data_qp_nums = {1};
  auto r = c.request(FrameType::kBootstrap, metadata::encodeBootstrap(m));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->type, FrameType::kBootstrapReply);
}

bool keepaliveAnswered(RawControl& c) {
  auto k = c.request(FrameType::kKeepalive, {});
  return k.ok() && k->type == FrameType::kKeepaliveReply;
}

std::vector<std::unique_ptr<RawControl>> openSessions(const std::string& address, int n,
                                                      const std::string& source = "") {
  std::vector<std::unique_ptr<RawControl>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<RawControl>());
    EXPECT_TRUE(out.back()->connect(address, source));
    EXPECT_TRUE(out.back()->handshake(Secret()).ok());
  }
  return out;
}

TEST_F(ControlNet, AtTheCapAnUnauthenticatedConnectionYieldsFirstThenAnIdleSession) {
  ServerOptions o;
  o.max_connections = 3;
  start(o);
  // Three connections that never say HELLO fill the cap: a fourth gets in anyway, and
  // the oldest of the three is closed to make room.
  std::vector<std::unique_ptr<RawControl>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawControl>());
    ASSERT_TRUE(idle.back()->connect(address));
  }
  ASSERT_TRUE(eventually([&] { return stats.connections_open.load() == 3; }));
  auto d = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_EQ(d->type, FrameType::kDescriptor);
  EXPECT_TRUE(idle[0]->closedByPeer());
  idle.clear();
  ASSERT_TRUE(eventually([&] { return stats.connections_open.load() == 0; }));
  // Three open sessions that hold nothing fill the cap: a newcomer is served, and the
  // oldest idle session is closed for it. No connection was refused.
  auto sessions = openSessions(address, 3);
  const uint64_t refused = stats.connections_refused.load();
  RawControl newcomer;
  ASSERT_TRUE(newcomer.connect(address));
  ASSERT_TRUE(newcomer.handshake(Secret()).ok());
  EXPECT_TRUE(keepaliveAnswered(newcomer));
  EXPECT_TRUE(sessions[0]->closedByPeer());
  EXPECT_TRUE(keepaliveAnswered(*sessions[1]));
  EXPECT_TRUE(keepaliveAnswered(*sessions[2]));
  EXPECT_TRUE(eventually([&] { return stats.sessions_evicted.load() == 1; }));
  EXPECT_EQ(stats.connections_refused.load(), refused);
}

TEST_F(ControlNet, SessionsHoldingEndpointsAreNeverClosedForRoom) {
  ServerOptions o;
  o.max_connections = 3;
  start(o);
  auto sessions = openSessions(address, 3);
  bootstrapOn(*sessions[0]);
  bootstrapOn(*sessions[2]);
  // Room for one newcomer: the idle session in the middle goes, the older one stays.
  RawControl first;
  ASSERT_TRUE(first.connect(address));
  ASSERT_TRUE(first.handshake(Secret()).ok());
  bootstrapOn(first);
  EXPECT_TRUE(sessions[1]->closedByPeer());
  // Now every session holds an endpoint: the next connection is closed at once.
  const uint64_t refused = stats.connections_refused.load();
  EXPECT_EQ(test::oneShot(address, FrameType::kGetDescriptor, {}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(eventually([&] { return stats.connections_refused.load() == refused + 1; }));
  EXPECT_EQ(stats.sessions_evicted.load(), 1u);
  for (RawControl* c : {sessions[0].get(), sessions[2].get(), &first})
    EXPECT_TRUE(keepaliveAnswered(*c));  // all still served
}

// One address at its cap makes room among its own connections: the sessions of other
// addresses are never its victims, even when they are older and idle.
TEST_F(ControlNet, AnAddressAtItsCapMakesRoomOnlyAmongItsOwnConnections) {
  ServerOptions o;
  o.max_connections = 100;
  o.max_connections_per_source = 2;
  start(o);
  auto others = openSessions(address, 2, "127.0.0.1");  // older, idle
  auto flood = openSessions(address, 2, "127.0.0.2");
  bootstrapOn(*flood[1]);
  // Each newcomer pushes out the address's oldest idle session: flood[0], then the
  // newcomers before it.
  auto more = openSessions(address, 3, "127.0.0.2");
  EXPECT_TRUE(flood[0]->closedByPeer());
  EXPECT_TRUE(more[0]->closedByPeer());
  EXPECT_TRUE(more[1]->closedByPeer());
  EXPECT_TRUE(keepaliveAnswered(*more[2]));
  EXPECT_TRUE(keepaliveAnswered(*flood[1]));  // holds an endpoint
  for (auto& c : others) EXPECT_TRUE(keepaliveAnswered(*c));
  EXPECT_EQ(stats.source_cap_hits.load(), 3u);
  EXPECT_EQ(stats.sessions_evicted.load(), 3u);
  EXPECT_EQ(stats.connections_refused.load(), 0u);
  // Both of the address's places hold endpoints now: it is refused, others are not.
  bootstrapOn(*more[2]);
  auto fromFlood = [&] {
    RawControl c;
    if (!c.connect(address, "127.0.0.2")) return Status::Unavailable("connect");
    return c.handshake(Secret());
  };
  EXPECT_EQ(fromFlood().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(eventually([&] { return stats.connections_refused.load() == 1; }));
  auto d = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_EQ(d->type, FrameType::kDescriptor);
}

// A session refused after it had opened (a bad frame) may hold endpoints: the
// handler hears of its end and frees them.
TEST_F(ControlNet, ASessionClosedForABadFrameAfterOpeningStillReportsItsEnd) {
  start({});
  RawControl c;
  ASSERT_TRUE(c.connect(address));
  ASSERT_TRUE(c.handshake(Secret()).ok());
  bootstrapOn(c);
  ASSERT_TRUE(c.send(FrameType::kHello, {}));  // out of place in an open session
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_TRUE(eventually([&] { return onLoop([&] { return handler.closed.size(); }) == 1u; }));
  EXPECT_EQ(onLoop([&] { return handler.closed.front(); }), handler.sessions.front());
}

TEST_F(ControlNet, Ipv6ListenerServesSessionsAndOneShots) {
  start({}, "::1");
  EXPECT_EQ(address.front(), '[');
  ASSERT_TRUE(session(Secret()).ok());
  EXPECT_EQ(listeners[0]->descriptor, kDescriptor);
  auto d = test::oneShot(address, FrameType::kGetDescriptor, {});
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_EQ(d->type, FrameType::kDescriptor);
}

// Out of file descriptors, the listener backs off instead of spinning on a readable
// listen socket, and serves again once descriptors are free. Run in a child process
// with a small RLIMIT_NOFILE (so the rest of this test program keeps its own).
TEST(ControlNetLimits, OutOfDescriptorsTheListenerBacksOffAndRecovers) {
  // Two pipes: with one, the child's wait for "stop" could read a byte of the port it
  // had just written, before the parent read it (a flaky failure, seen in the suite).
  int ready[2], stop[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(stop), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Handler handler;
    ControlCounters stats;
    auto loop = std::move(EventLoop::create()).value();
    auto server =
        std::move(ControlServer::create(*loop, "127.0.0.1", 0, {}, handler, stats)).value();
    if (!server->start().ok()) _exit(3);
    rlimit lim{64, 64};
    setrlimit(RLIMIT_NOFILE, &lim);
    const uint16_t port = server->port();
    if (write(ready[1], &port, sizeof port) != sizeof port) _exit(4);
    loop->start("emfile-loop");
    char c;
    (void)!read(stop[0], &c, 1);  // the parent says when to stop
    loop->post([&] { server.reset(); });
    loop->stop();
    loop->join();
    _exit(0);
  }
  uint16_t port = 0;
  ASSERT_EQ(read(ready[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  const std::string to = "127.0.0.1:" + std::to_string(port);
  // 200 connections: the child's 64 descriptors run out; the rest wait in its backlog.
  std::vector<std::unique_ptr<RawControl>> held;
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<RawControl>());
    ASSERT_TRUE(held.back()->connect(to));
  }
  auto cpu = [&] {
    std::ifstream f("/proc/" + std::to_string(child) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), {});
    std::istringstream rest(s.substr(s.rfind(')') + 2));
    std::string field;
    unsigned long long t = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i)
      if (i == 14 || i == 15) t += std::stoull(field);
    return static_cast<double>(t) / static_cast<double>(sysconf(_SC_CLK_TCK));
  };
  const double before = cpu();
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) std::this_thread::yield();
  std::printf("out of descriptors: the listener used %.2f s of CPU in 1 s\n", cpu() - before);
  held.clear();
  // With descriptors back (held connections closed, their sessions gone), it serves.
  EXPECT_TRUE(eventually(
      [&] {
        auto d = test::oneShot(to, FrameType::kGetDescriptor, {});
        return d.ok() && d->type == FrameType::kDescriptor;
      },
      20));
  ASSERT_EQ(write(stop[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A request whose send fails at once (the peer's socket is gone: the first write
// draws a reset, the next one fails) is answered with the session's end, as every
// request in flight is. Before, the request being sent was held aside while the
// failed send ended the session, and was never answered: an endpoint waiting on its
// BOOTSTRAP reply was never freed (the chaos suite's leaked endpoints).
TEST_F(ControlNet, ARequestWhoseSendFailsAtOnceIsAnswered) {
  start({});
  ASSERT_TRUE(session(Secret()).ok());
  constexpr int kRequests = 4;
  auto answered = std::make_shared<std::atomic<int>>(0);
  onLoop([&] {
    server.reset();  // in the same loop turn: the client has not seen the close yet
    for (int i = 0; i < kRequests; ++i)
      clients[0]->request(FrameType::kKeepalive, {},
                          [answered](Result<ClientSession::Reply>) { ++*answered; });
    return 0;
  });
  EXPECT_TRUE(eventually([&] { return answered->load() == kRequests; }))
      << answered->load() << " of " << kRequests << " requests answered";
  EXPECT_TRUE(eventually([&] { return onLoop([&] { return !listeners[0]->down.ok(); }); }));
}

TEST_F(ControlNet, SessionEndIsReportedToTheHandlerOnce) {
  start({});
  {
    RawControl c;
    ASSERT_TRUE(c.connect(address));
    ASSERT_TRUE(c.handshake(Secret()).ok());
    metadata::ReleaseMessage m;
    m.generation = 9;
    ASSERT_TRUE(c.send(FrameType::kRelease, metadata::encodeRelease(m)));
    auto k = c.request(FrameType::kKeepalive, {});  // in order: RELEASE was handled first
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(k->type, FrameType::kKeepaliveReply);
  }
  // The raw client closed: the server reports the session once.
  ASSERT_TRUE(eventually([&] { return onLoop([&] { return handler.closed.size(); }) != 0; }));
  onLoop([&] {
    EXPECT_EQ(handler.closed.size(), 1u);
    EXPECT_EQ(handler.released, std::vector<uint64_t>{9});
    return 0;
  });
}

}  // namespace
}  // namespace tent::control
