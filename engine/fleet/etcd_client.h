// etcd v3 through its JSON gateway, on the control loop: key-value, leases, a watch
// stream. Several members: a request that fails on one (refused, timed out, etcd
// unavailable) is sent to the next, each try bounded by request_timeout_ms, so one
// member of three down is survived; the member that answered is tried first next
// time. With a user configured, a token is fetched first and sent with each request.
// Every callback runs exactly once, on the loop. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "fleet/etcd_json.h"
#include "fleet/http_client.h"

namespace tent::fleet {

class EtcdClient {
 public:
  template <typename T>
  using Cb = std::function<void(Result<T>)>;
  using Body = Result<std::string>;

  // `password`: the contents of metadata.etcd.password_file (read by the caller).
  static Result<std::unique_ptr<EtcdClient>> create(control::EventLoop& loop,
                                                    const config::EtcdConfig& config,
                                                    std::string password);
  ~EtcdClient();

  void range(const std::string& key, Cb<std::vector<KeyValue>> done);
  void put(const std::string& key, const std::string& value, int64_t lease,
           std::function<void(Status)> done);
  void remove(const std::string& key, std::function<void(Status)> done);
  void leaseGrant(int64_t ttl_s, Cb<int64_t> done);
  void keepAlive(int64_t lease, Cb<int64_t> done);
  void revoke(int64_t lease, std::function<void(Status)> done);
  // A watch on every key under `prefix` from `start_revision` (0: from now). Each
  // message as it comes; `ended` once when the stream ends (etcd away, canceled).
  uint64_t watch(const std::string& prefix, int64_t start_revision,
                 std::function<void(WatchMessage)> on_message, std::function<void(Status)> ended);
  void cancel(uint64_t request_id) { http_->cancel(request_id); }

  HttpClient& http() noexcept { return *http_; }
  size_t members() const noexcept { return config_.endpoints.size(); }

 private:
  EtcdClient(const config::EtcdConfig& config, std::string password)
      : config_(config), password_(std::move(password)) {}
  // POSTs `body` to `path`, moving on to the next member on a transport failure.
  void call(const std::string& path, std::string body, Cb<std::string> done, size_t tries = 0);
  void authenticate(std::function<void(Status)> done);
  std::string url(size_t member, const std::string& path) const;
  HttpOptions options(bool stream) const;
  std::vector<std::string> headers() const;

  config::EtcdConfig config_;
  std::string password_;
  std::string token_;
  std::unique_ptr<HttpClient> http_;
  size_t member_ = 0;  // the member tried first
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tent::fleet
