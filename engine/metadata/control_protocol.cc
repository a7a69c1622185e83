#include "engine/metadata/control_protocol.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "engine/metadata/wire.h"
#include "tent/log.h"

namespace tent::metadata {

Status splitHostPort(std::string_view name, std::string* host, uint16_t* port) {
  size_t colon = name.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == name.size())
    return Status::InvalidArgument("segment name '" + std::string(name) + "' is not host:port");
  unsigned long value = 0;
  for (char c : name.substr(colon + 1)) {
    if (c < '0' || c > '9')
      return Status::InvalidArgument("bad port in '" + std::string(name) + "'");
    value = value * 10 + static_cast<unsigned long>(c - '0');
    if (value > 65535)
      return Status::InvalidArgument("port out of range in '" + std::string(name) + "'");
  }
  host->assign(name.substr(0, colon));
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

namespace {

using Clock = std::chrono::steady_clock;

int remainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool waitFd(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    int r = ::poll(&p, 1, remainingMs(deadline));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

bool sendAll(int fd, const uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (!waitFd(fd, POLLOUT, deadline)) return false;
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool recvAll(int fd, uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (!waitFd(fd, POLLIN, deadline)) return false;
    ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool sendFrame(int fd, const ControlFrame& f, Clock::time_point deadline) {
  WireWriter w;
  w.u32(kControlMagic);
  w.u16(static_cast<uint16_t>(f.type));
  w.u32(static_cast<uint32_t>(f.payload.size()));
  w.raw(f.payload.data(), f.payload.size());
  return sendAll(fd, w.bytes().data(), w.size(), deadline);
}

Result<ControlFrame> recvFrame(int fd, Clock::time_point deadline) {
  uint8_t header[10];
  if (!recvAll(fd, header, sizeof header, deadline))
    return Status::Unavailable("control connection closed or timed out");
  WireReader r(header, sizeof header);
  uint32_t magic = 0, length = 0;
  uint16_t type = 0;
  (void)r.u32(&magic);
  (void)r.u16(&type);
  (void)r.u32(&length);
  if (magic != kControlMagic) return Status::InvalidArgument("control frame: wrong magic");
  if (length > kMaxControlPayload)
    return Status::InvalidArgument("control frame: length out of range");
  ControlFrame f;
  f.type = static_cast<ControlType>(type);
  f.payload.resize(length);
  if (!recvAll(fd, f.payload.data(), length, deadline))
    return Status::Unavailable("control frame truncated");
  return f;
}

Result<int> connectTo(const std::string& name, Clock::time_point deadline) {
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(name, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    return Status::NotFound("cannot resolve host '" + host + "'");
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  int r = ::connect(fd, res->ai_addr, res->ai_addrlen);
  if (r != 0 && errno == EINPROGRESS && waitFd(fd, POLLOUT, deadline)) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    r = err == 0 ? 0 : -1;
    errno = err ? err : ETIMEDOUT;
  } else if (r != 0 && errno == EINPROGRESS) {
    errno = ETIMEDOUT;
  }
  if (r != 0) {
    int err = errno;
    ::close(fd);
    return Status::Unavailable("cannot reach peer " + name + ": " + std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Result<ControlFrame> controlRequest(const std::string& name, const ControlFrame& request,
                                    uint32_t connect_timeout_ms, uint32_t io_timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms);
  TENT_ASSIGN_OR_RETURN(int fd, connectTo(name, deadline));
  deadline =
      Clock::now() + std::chrono::milliseconds(io_timeout_ms ? io_timeout_ms : connect_timeout_ms);
  Result<ControlFrame> reply = Status::Unavailable("peer " + name + " did not answer in time");
  if (sendFrame(fd, request, deadline)) reply = recvFrame(fd, deadline);
  ::close(fd);
  if (!reply.ok()) return reply.status().withContext("control request to " + name);
  if (reply->type == ControlType::kError)
    return Status::FailedPrecondition("peer " + name + ": " +
                                      std::string(reply->payload.begin(), reply->payload.end()));
  return reply;
}

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& listen,
                                                            Handler handler,
                                                            const std::string& advertise_host) {
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(listen, &host, &port));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return Status::InvalidArgument("bootstrap.listen: '" + host + "' is not an IPv4 address");
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->handler_ = std::move(handler);
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s->listen_fd_, 128) != 0)
    return Status::Unavailable("cannot listen on " + listen + ": " + std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->name_ =
      (advertise_host.empty() ? host : advertise_host) + ":" + std::to_string(ntohs(addr.sin_port));
  s->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->thread_ = std::thread([srv = s.get()] { srv->run(); });
  return s;
}

ControlServer::~ControlServer() {
  stop();
}

void ControlServer::stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void ControlServer::run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    serve(fd);
    ::close(fd);
  }
}

void ControlServer::serve(int fd) {
  // A bounded budget per connection: a stuck client cannot hold the listener.
  auto deadline = Clock::now() + std::chrono::seconds(2);
  auto request = recvFrame(fd, deadline);
  ControlFrame reply;
  if (!request.ok()) {
    reply.type = ControlType::kError;
    std::string m = request.status().toString();
    reply.payload.assign(m.begin(), m.end());
  } else {
    reply = handler_(*request);
  }
  (void)sendFrame(fd, reply, deadline);
}

}  // namespace tent::metadata
