// The control connection: TCP, one request and one response per connection.
// Frame: magic u32 | type u16 | payload length u32 | payload.
// Requests: kGetDescriptor (empty) -> kDescriptor; kBootstrap (a bootstrap
// message) -> kBootstrapReply (the passive side's bootstrap message). Any failure
// is answered with kError carrying a message.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tent/status.h"

namespace tent::metadata {

inline constexpr uint32_t kControlMagic = 0x4c544354;  // "TCTL"
inline constexpr uint32_t kMaxControlPayload = 64u << 20;

enum class ControlType : uint16_t {
  kGetDescriptor = 1,
  kBootstrap = 2,
  kDescriptor = 0x81,
  kBootstrapReply = 0x82,
  kError = 0xff,
};

struct ControlFrame {
  ControlType type = ControlType::kError;
  std::vector<uint8_t> payload;
};

// "host:port" -> parts. InvalidArgument when malformed.
Status splitHostPort(std::string_view name, std::string* host, uint16_t* port);

// Sends one request to `name` ("host:port") and returns the response frame.
// kError responses become a Status with the peer's message. Unavailable when the
// peer cannot be reached within `connect_timeout_ms`, or does not answer within
// `io_timeout_ms` once connected.
Result<ControlFrame> controlRequest(const std::string& name, const ControlFrame& request,
                                    uint32_t connect_timeout_ms, uint32_t io_timeout_ms = 0);

// The control listener: a thread accepting connections on `listen` and answering
// each with `handler`. The handler runs on the listener thread (control path).
class ControlServer {
 public:
  using Handler = std::function<ControlFrame(const ControlFrame& request)>;
  ~ControlServer();
  // Binds and starts. `listen` "host:port", port 0 = any free port. The name uses
  // `advertise_host` when not empty (for a wildcard listen address).
  static Result<std::unique_ptr<ControlServer>> start(const std::string& listen, Handler handler,
                                                      const std::string& advertise_host = "");
  // "host:port" with the bound port: this engine's segment name.
  const std::string& name() const noexcept { return name_; }
  void stop();

 private:
  ControlServer() = default;
  void run();
  void serve(int fd);

  Handler handler_;
  std::string name_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace tent::metadata
