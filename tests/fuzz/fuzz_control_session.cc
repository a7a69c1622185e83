// libFuzzer target: the control listener end to end. Each input is one client's whole
// byte stream to a real ControlServer on loopback (its event loop on its own thread,
// a stub handler): HELLO/AUTH handshakes, one-shot v1 requests, partial and oversized
// frames, tags, garbage. The first byte picks a server with or without a secret. The
// server must never crash, leak or misbehave, and must keep serving: after every
// input a well-formed one-shot request is answered.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "net/address.h"
#include "net/server.h"
#include "wire/bootstrap.h"
#include "tests/fuzz/fuzz_check.h"

namespace c = tent::control;
namespace m = tent::metadata;

namespace {

struct Stub : c::ServerHandler {
  std::vector<uint8_t> descriptorFor(uint16_t) override { return {1, 2, 3}; }
  tent::Result<m::BootstrapMessage> acceptBootstrap(c::ServerSession*,
                                                    const m::BootstrapMessage& r) override {
    return r;
  }
  void release(c::ServerSession&, const m::ReleaseMessage&) override {}
  void sessionClosed(c::ServerSession&) override {}
};

struct Server {
  explicit Server(bool secret) {
    loop = std::move(c::EventLoop::create()).value();
    c::ServerOptions o;
    if (secret) o.secret = c::Secret::fromBytes(std::string(40, 's'));
    // Each conversation ends with the client's half-close, which the server sees at
    // once; the deadlines only bound a server that waits. They are generous because a
    // deadline that fires on the answer check's own connection (a starved event loop
    // on a loaded machine) is the server doing its job, not a failure (seen once in
    // 66,688 runs with 200 ms).
    o.handshake_timeout_ns = 5'000'000'000;
    o.io_timeout_ns = 5'000'000'000;
    server = std::move(c::ControlServer::create(*loop, "127.0.0.1", 0, o, handler, stats)).value();
    (void)server->start();
    loop->start("fuzz-loop");
    address = std::move(c::resolve("127.0.0.1", server->port())).value();
  }
  // At exit: the server is torn down on its loop's thread, then the loop stops.
  ~Server() {
    loop->post([this] { server.reset(); });
    loop->stop();
    loop->join();
  }
  Stub handler;
  c::ControlCounters stats;
  std::unique_ptr<c::EventLoop> loop;
  std::unique_ptr<c::ControlServer> server;
  c::SocketAddress address;
};

// `recv_timeout_s` (0: none) only ends a conversation early; it is no speed
// requirement (a loaded machine may starve the server's thread for many seconds).
int dial(const c::SocketAddress& a, time_t recv_timeout_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  c::tuneSocket(fd);
  timeval tv{recv_timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, a.get(), a.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes`, half-closes, and reads whatever the server says until it closes.
// The server closes the connection once it read the client's half-close; a read that
// times out here only ends the conversation early.
void converse(const c::SocketAddress& a, const uint8_t* bytes, size_t n) {
  const int fd = dial(a, 1);
  if (fd < 0) return;
  (void)!::send(fd, bytes, n, MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  uint8_t buf[4096];
  while (::recv(fd, buf, sizeof buf, 0) > 0) {
  }
  ::close(fd);
}

// Why the last stillServes() failed (printed with the failed check).
const char* g_why = "";

bool stillServes(const c::SocketAddress& a) {
  std::vector<uint8_t> frame(m::kFrameHeaderBytes);
  m::encodeFrameHeader(m::FrameType::kGetDescriptor, 0, frame.data());
  // No read timeout: the answer comes or the connection closes; a server that hangs
  // is what libFuzzer's -timeout (run_fuzzer.sh) reports.
  const int fd = dial(a, 0);
  if (fd < 0) {
    g_why = "connect failed";
    return false;
  }
  (void)!::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  uint8_t header[m::kFrameHeaderBytes];
  size_t got = 0;
  while (got < sizeof header) {
    const ssize_t r = ::recv(fd, header + got, sizeof header - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  g_why = got == sizeof header ? "" : "closed without an answer";
  return got == sizeof header;  // a DESCRIPTOR or, with a secret, an ERROR: an answer
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server open_server(false), secret_server(true);
  if (size == 0) return 0;
  Server& s = (data[0] & 1) ? secret_server : open_server;
  converse(s.address, data + 1, size - 1);
  // Three tries: a server that stopped serving fails them all.
  bool serves = false;
  for (int attempt = 0; attempt < 3 && !serves; ++attempt) serves = stillServes(s.address);
  if (!serves) {
    std::fprintf(stderr,
                 "the listener stopped answering (%s): connections open %llu, refused %llu, "
                 "deadline closures %llu, frames rejected %llu, errno %d\n",
                 g_why, (unsigned long long)s.stats.connections_open.load(),
                 (unsigned long long)s.stats.connections_refused.load(),
                 (unsigned long long)s.stats.deadline_closures.load(),
                 (unsigned long long)s.stats.frames_rejected.load(), errno);
    FUZZ_CHECK(false, "the listener stopped answering");
  }
  return 0;
}
