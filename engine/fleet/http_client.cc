#include "fleet/http_client.h"

#include <curl/curl.h>

#include <mutex>

#include "base/clock.h"

namespace tent::fleet {

struct HttpClient::Request {
  uint64_t id = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  std::string response;
  Done done;
  Chunk chunk;
  bool completed = false;
};

class HttpClient::SocketWatch final : public control::EventLoop::Handler {
 public:
  SocketWatch(HttpClient& client, int fd) : client_(client), fd_(fd) {}
  // act() may destroy this watch (curl removes the socket): nothing after it.
  void onEvents(uint32_t events) override {
    int what = 0;
    if (events & EPOLLIN) what |= CURL_CSELECT_IN;
    if (events & EPOLLOUT) what |= CURL_CSELECT_OUT;
    if (events & (EPOLLERR | EPOLLHUP)) what |= CURL_CSELECT_ERR;
    client_.act(fd_, what);
  }

 private:
  HttpClient& client_;
  int fd_;
};

namespace {

std::once_flag g_curl_init;

size_t onWrite(char* data, size_t size, size_t count, void* user) {
  auto* req = static_cast<HttpClient::Request*>(user);
  if (req->completed) return 0;  // canceled: abort the transfer
  const size_t n = size * count;
  if (req->chunk) {
    req->chunk(std::string_view(data, n));
    return req->completed ? 0 : n;
  }
  // etcd's answers are small; a body past this is not one of them.
  constexpr size_t kMaxBody = 16u << 20;
  if (req->response.size() + n > kMaxBody) return 0;
  req->response.append(data, n);
  return n;
}

// A failed exchange's message; a TLS failure names the config key to look at (the
// operator's fix is there, not in the network).
std::string transportError(CURLcode rc) {
  std::string what = std::string("etcd request: ") + curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
      return what + " (etcd's certificate does not verify against metadata.etcd.tls.ca_file)";
    case CURLE_SSL_CACERT_BADFILE:
      return what + " (metadata.etcd.tls.ca_file cannot be read as a CA bundle)";
    case CURLE_SSL_CERTPROBLEM:
      return what + " (metadata.etcd.tls.cert_file / key_file cannot be used)";
    case CURLE_SSL_CONNECT_ERROR:
      return what +
             " (TLS handshake with etcd failed: http vs https, or a client certificate etcd "
             "refuses: metadata.etcd.tls.ca_file, cert_file, key_file)";
    default:
      return what;
  }
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::create(control::EventLoop& loop) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<HttpClient> c(new HttpClient(loop));
  c->multi_ = curl_multi_init();
  if (c->multi_ == nullptr) return Status::Internal("curl_multi_init failed");
  curl_multi_setopt(c->multi_, CURLMOPT_SOCKETFUNCTION, &HttpClient::onSocket);
  curl_multi_setopt(c->multi_, CURLMOPT_SOCKETDATA, c.get());
  curl_multi_setopt(c->multi_, CURLMOPT_TIMERFUNCTION, &HttpClient::onTimer);
  curl_multi_setopt(c->multi_, CURLMOPT_TIMERDATA, c.get());
  return c;
}

HttpClient::HttpClient(control::EventLoop& loop) : loop_(loop) {}

HttpClient::~HttpClient() {
  while (!requests_.empty()) finish(requests_.begin()->first, Status::Canceled("client closed"));
  bury();
  if (timer_ != 0) loop_.cancelTimer(timer_);
  for (auto& [fd, watch] : sockets_) loop_.remove(fd);
  sockets_.clear();
  if (multi_ != nullptr) curl_multi_cleanup(multi_);
}

uint64_t HttpClient::post(const std::string& url, std::string body, const HttpOptions& options,
                          std::vector<std::string> headers, Done done, Chunk on_chunk) {
  auto req = std::make_unique<Request>();
  req->id = next_id_++;
  req->body = std::move(body);
  req->done = std::move(done);
  req->chunk = std::move(on_chunk);
  req->easy = curl_easy_init();
  if (req->easy == nullptr) {
    req->done(Status::Internal("curl_easy_init failed"));
    return 0;
  }
  ++live_handles_;
  headers.push_back("Content-Type: application/json");
  headers.push_back("Expect:");  // no 100-continue round trip
  for (const std::string& h : headers) req->headers = curl_slist_append(req->headers, h.c_str());
  CURL* e = req->easy;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(req->body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &onWrite);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, req.get());
  curl_easy_setopt(e, CURLOPT_PRIVATE, req.get());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROXY, "");  // never through a proxy from the environment
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ns / 1'000'000));
  curl_easy_setopt(
      e, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(std::max<uint64_t>(options.connect_timeout_ns / 1'000'000, 1)));
  if (!options.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!options.cert_file.empty()) {
    curl_easy_setopt(e, CURLOPT_SSLCERT, options.cert_file.c_str());
    curl_easy_setopt(e, CURLOPT_SSLKEY, options.key_file.c_str());
  }
  const uint64_t id = req->id;
  requests_[id] = std::move(req);
  if (curl_multi_add_handle(multi_, e) != CURLM_OK) {
    finish(id, Status::Internal("curl_multi_add_handle failed"));
    bury();
  }
  return id;
}

void HttpClient::cancel(uint64_t id) {
  finish(id, Status::Canceled("request canceled"));
  if (!acting_) bury();
}

// Completes the request once and hands its curl handle to the graveyard: a handle is
// removed from the multi handle only outside curl's own callbacks.
void HttpClient::finish(uint64_t id, Result<HttpReply> r) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::unique_ptr<Request> req = std::move(it->second);
  requests_.erase(it);
  req->completed = true;
  Done done = std::move(req->done);
  graveyard_.push_back(std::move(req));
  if (done) done(std::move(r));
}

void HttpClient::bury() {
  auto dead = std::move(graveyard_);
  graveyard_.clear();
  for (auto& req : dead) {
    curl_multi_remove_handle(multi_, req->easy);
    curl_easy_cleanup(req->easy);
    curl_slist_free_all(req->headers);
    --live_handles_;
  }
}

int HttpClient::onSocket(void*, int fd, int what, void* self, void*) {
  auto* c = static_cast<HttpClient*>(self);
  if (what == CURL_POLL_REMOVE) {
    if (c->sockets_.erase(fd) != 0) c->loop_.remove(fd);
    return 0;
  }
  uint32_t events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  auto it = c->sockets_.find(fd);
  if (it != c->sockets_.end()) {
    (void)c->loop_.modify(fd, events);
    return 0;
  }
  auto watch = std::make_unique<SocketWatch>(*c, fd);
  if (!c->loop_.add(fd, events, watch.get()).ok()) return -1;
  c->sockets_[fd] = std::move(watch);
  return 0;
}

int HttpClient::onTimer(void*, long timeout_ms, void* self) {
  auto* c = static_cast<HttpClient*>(self);
  if (c->timer_ != 0) c->loop_.cancelTimer(c->timer_);
  c->timer_ = 0;
  if (timeout_ms < 0) return 0;
  c->timer_ = c->loop_.addTimer(clock::monotonicNs() + uint64_t(timeout_ms) * 1'000'000, [c] {
    c->timer_ = 0;
    c->act(CURL_SOCKET_TIMEOUT, 0);
  });
  return 0;
}

void HttpClient::act(int fd, int events) {
  int running = 0;
  acting_ = true;
  curl_multi_socket_action(multi_, fd, events, &running);
  acting_ = false;
  collect();
  bury();
}

void HttpClient::collect() {
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    Request* req = nullptr;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &req);
    if (req == nullptr || req->completed) continue;
    const CURLcode rc = m->data.result;
    if (rc == CURLE_OK) {
      HttpReply reply;
      curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &reply.status);
      reply.body = std::move(req->response);
      finish(req->id, std::move(reply));
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      finish(req->id, Status::Timeout(std::string("etcd request: ") + curl_easy_strerror(rc)));
    } else {
      finish(req->id, Status::Unavailable(transportError(rc)));
    }
  }
}

}  // namespace tent::fleet
