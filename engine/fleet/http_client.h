// HTTP/1.1 requests on libcurl's multi interface, driven by the control loop: curl's
// sockets are watched by the loop's epoll, its timers are loop timers. Nothing here
// blocks or sleeps on the network; every request completes exactly once (answer,
// transport error, its own deadline, cancel() or the client's destruction).
// Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "net/event_loop.h"
#include "tent/status.h"

namespace tent::fleet {

struct HttpOptions {
  uint64_t timeout_ns = 2'000'000'000;  // whole request; 0: none (a stream)
  uint64_t connect_timeout_ns = 2'000'000'000;
  std::string ca_file;  // https: the CA to check the server against
  std::string cert_file;
  std::string key_file;
};

struct HttpReply {
  long status = 0;  // HTTP status code
  std::string body;
};

class HttpClient {
 public:
  using Done = std::function<void(Result<HttpReply>)>;
  // A stream's body as it arrives, in pieces of any size.
  using Chunk = std::function<void(std::string_view)>;

  static Result<std::unique_ptr<HttpClient>> create(control::EventLoop& loop);
  ~HttpClient();  // completes every open request with Canceled
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POST `body` (JSON) to `url`. `on_chunk` set: the body is handed over as it arrives
  // (a watch stream) and the reply's body stays empty. Returns the request's id.
  uint64_t post(const std::string& url, std::string body, const HttpOptions& options,
                std::vector<std::string> headers, Done done, Chunk on_chunk = {});
  // Completes request `id` with Canceled now (nothing when it completed already).
  void cancel(uint64_t id);

  // Requests open and curl handles alive (a churn test sees both return to 0).
  size_t openRequests() const noexcept { return requests_.size(); }
  size_t liveHandles() const noexcept { return live_handles_; }

  struct Request;  // public for curl's C callbacks

 private:
  class SocketWatch;
  explicit HttpClient(control::EventLoop& loop);
  static int onSocket(void* easy, int fd, int what, void* self, void* socket_data);
  static int onTimer(void* multi, long timeout_ms, void* self);
  void act(int fd, int events);
  void collect();
  void finish(uint64_t id, Result<HttpReply> r);
  void bury();

  control::EventLoop& loop_;
  void* multi_ = nullptr;  // CURLM*
  std::map<uint64_t, std::unique_ptr<Request>> requests_;
  std::map<int, std::unique_ptr<SocketWatch>> sockets_;
  std::vector<std::unique_ptr<Request>> graveyard_;  // completed, handle not yet removed
  uint64_t timer_ = 0;
  uint64_t next_id_ = 1;
  size_t live_handles_ = 0;
  bool acting_ = false;
};

}  // namespace tent::fleet
