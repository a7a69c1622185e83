#include "fleet/etcd_client.h"

namespace tent::fleet {

namespace {

// A failure of this member that another member may not share.
bool tryNextMember(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimeout;
}

Status httpStatus(const HttpReply& r) {
  if (r.status == 200) return Status::OK();
  Status e = parseError(r.body);
  if (!e.ok()) return e;
  if (r.status >= 500 || r.status == 0)
    return Status::Unavailable("etcd answered HTTP " + std::to_string(r.status));
  return Status::Internal("etcd answered HTTP " + std::to_string(r.status));
}

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::create(control::EventLoop& loop,
                                                       const config::EtcdConfig& config,
                                                       std::string password) {
  if (config.endpoints.empty())
    return Status::InvalidArgument("metadata.etcd.endpoints: no etcd member given");
  std::unique_ptr<EtcdClient> c(new EtcdClient(config, std::move(password)));
  TENT_ASSIGN_OR_RETURN(c->http_, HttpClient::create(loop));
  return c;
}

EtcdClient::~EtcdClient() {
  *alive_ = false;  // callbacks of requests canceled below find nobody
  http_.reset();
}

std::string EtcdClient::url(size_t member, const std::string& path) const {
  const char* scheme = config_.tls.ca_file.empty() ? "http://" : "https://";
  return scheme + config_.endpoints[member % config_.endpoints.size()] + path;
}

HttpOptions EtcdClient::options(bool stream) const {
  HttpOptions o;
  o.timeout_ns = stream ? 0 : uint64_t{config_.request_timeout_ms} * 1'000'000;
  o.connect_timeout_ns = uint64_t{config_.request_timeout_ms} * 1'000'000;
  o.ca_file = config_.tls.ca_file;
  o.cert_file = config_.tls.cert_file;
  o.key_file = config_.tls.key_file;
  return o;
}

std::vector<std::string> EtcdClient::headers() const {
  if (token_.empty()) return {};
  return {"Authorization: " + token_};
}

void EtcdClient::authenticate(std::function<void(Status)> done) {
  const size_t member = member_;
  http_->post(url(member, "/v3/auth/authenticate"), authBody(config_.user, password_),
              options(false), {},
              [this, alive = alive_, done = std::move(done)](Result<HttpReply> r) {
                if (!*alive) return;
                if (!r.ok()) return done(r.status());
                if (Status s = httpStatus(*r); !s.ok()) return done(s);
                auto token = parseAuthToken(r->body);
                if (!token.ok()) return done(token.status());
                token_ = std::move(token).value();
                done(Status::OK());
              });
}

void EtcdClient::call(const std::string& path, std::string body, Cb<std::string> done,
                      size_t tries) {
  if (!config_.user.empty() && token_.empty()) {
    return authenticate(
        [this, path, body = std::move(body), done = std::move(done), tries](Status s) mutable {
          if (!s.ok() && tryNextMember(s) && tries + 1 < members()) {
            member_ = (member_ + 1) % members();
            return call(path, std::move(body), std::move(done), tries + 1);
          }
          // Refused (not unreachable): the user or its password is what to fix.
          if (!s.ok())
            return done(s.withContext(
                "etcd authenticate as '" + config_.user + "'" +
                (tryNextMember(s) ? "" : " (metadata.etcd.user, metadata.etcd.password_file)")));
          call(path, std::move(body), std::move(done), tries);
        });
  }
  const size_t member = member_;
  std::string copy = body;
  http_->post(url(member, path), std::move(copy), options(false), headers(),
              [this, alive = alive_, path, body = std::move(body), done = std::move(done), tries,
               member](Result<HttpReply> r) mutable {
                if (!*alive) return;
                Status s = r.ok() ? httpStatus(*r) : r.status();
                if (s.ok()) return done(std::move(r->body));
                if (s.code() == StatusCode::kPermissionDenied && !config_.user.empty() &&
                    !token_.empty() && tries == 0) {
                  token_.clear();  // expired token: fetch a new one, once
                  return call(path, std::move(body), std::move(done), members());
                }
                if (tryNextMember(s) && tries + 1 < members()) {
                  if (member_ == member) member_ = (member + 1) % members();
                  return call(path, std::move(body), std::move(done), tries + 1);
                }
                done(s.withContext("etcd " + config_.endpoints[member % members()] + path));
              });
}

void EtcdClient::range(const std::string& key, Cb<std::vector<KeyValue>> done) {
  call("/v3/kv/range", rangeBody(key), [done = std::move(done)](Result<std::string> b) {
    if (!b.ok()) return done(b.status());
    done(parseRange(*b));
  });
}

void EtcdClient::put(const std::string& key, const std::string& value, int64_t lease,
                     std::function<void(Status)> done) {
  call("/v3/kv/put", putBody(key, value, lease),
       [done = std::move(done)](Result<std::string> b) { done(b.status()); });
}

void EtcdClient::remove(const std::string& key, std::function<void(Status)> done) {
  call("/v3/kv/deleterange", deleteBody(key),
       [done = std::move(done)](Result<std::string> b) { done(b.status()); });
}

void EtcdClient::leaseGrant(int64_t ttl_s, Cb<int64_t> done) {
  call("/v3/lease/grant", leaseGrantBody(ttl_s), [done = std::move(done)](Result<std::string> b) {
    if (!b.ok()) return done(b.status());
    done(parseLeaseGrant(*b));
  });
}

void EtcdClient::keepAlive(int64_t lease, Cb<int64_t> done) {
  call("/v3/lease/keepalive", leaseIdBody(lease), [done = std::move(done)](Result<std::string> b) {
    if (!b.ok()) return done(b.status());
    done(parseKeepAlive(*b));
  });
}

void EtcdClient::revoke(int64_t lease, std::function<void(Status)> done) {
  call("/v3/lease/revoke", leaseIdBody(lease),
       [done = std::move(done)](Result<std::string> b) { done(b.status()); });
}

uint64_t EtcdClient::watch(const std::string& prefix, int64_t start_revision,
                           std::function<void(WatchMessage)> on_message,
                           std::function<void(Status)> ended) {
  auto buffer = std::make_shared<std::string>();
  auto failed = std::make_shared<Status>();
  auto id = std::make_shared<uint64_t>(0);
  // A stream that sends what is not etcd's is cut at once (ended with the reason).
  auto chunk = [this, alive = alive_, buffer, failed, id,
                on_message = std::move(on_message)](std::string_view piece) {
    if (!*alive || !failed->ok()) return;
    buffer->append(piece);
    auto lines = takeLines(buffer.get());
    if (!lines.ok()) *failed = lines.status();
    for (size_t i = 0; lines.ok() && failed->ok() && i < lines->size(); ++i) {
      auto m = parseWatchMessage((*lines)[i]);
      if (!m.ok())
        *failed = m.status();
      else
        on_message(std::move(m).value());
    }
    if (!failed->ok()) http_->cancel(*id);
  };
  const size_t member = member_;
  *id = http_->post(
      url(member, "/v3/watch"), watchBody(prefix, start_revision), options(true), headers(),
      [this, alive = alive_, failed, ended = std::move(ended), member](Result<HttpReply> r) {
        if (!*alive) return;
        if (!failed->ok()) return ended(*failed);
        if (!r.ok() || r->status != 200) {
          if (member_ == member) member_ = (member + 1) % members();
          return ended(r.ok() ? httpStatus(*r) : r.status());
        }
        ended(Status::Unavailable("etcd watch stream ended"));
      },
      std::move(chunk));
  return *id;
}

}  // namespace tent::fleet
