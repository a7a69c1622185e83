// The exporter: prometheus-cpp's Exposer (civetweb) serving one Collectable that
// snapshots TransferEngine::stats() per scrape. prometheus-cpp and civetweb throw;
// nothing they throw leaves this file.
#include "metrics/exporter.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "metrics/collect.h"
#include "tent/log.h"

namespace tent::metrics {
namespace {

// civetweb says why a start failed only through log_message, on the starting thread;
// the exception it then throws says "null context". While a start runs, the messages
// are kept here for the Status; at other times they go to the log.
thread_local std::string* t_start_messages = nullptr;

int logMessage(const mg_connection* /*conn*/, const char* message) {
  if (t_start_messages != nullptr) {
    if (!t_start_messages->empty()) *t_start_messages += "; ";
    *t_start_messages += message;
  } else {
    TENT_WARN(kMetrics, "http server: %s", message);
  }
  return 1;  // handled: civetweb prints nothing itself
}

struct KeepStartMessages {
  explicit KeepStartMessages(std::string* into) { t_start_messages = into; }
  ~KeepStartMessages() { t_start_messages = nullptr; }
  KeepStartMessages(const KeepStartMessages&) = delete;
  KeepStartMessages& operator=(const KeepStartMessages&) = delete;
};

}  // namespace

// The engines attached to one server; a scrape and a detach take the same lock, so no
// scrape reads an engine after its detach returned.
class StatsCollectable final : public prometheus::Collectable {
 public:
  void attach(const TransferEngine* engine) {
    std::lock_guard lock(mu_);
    engines_.push_back({engine, engine->segmentName()});
  }
  void detach(const TransferEngine* engine) {
    std::lock_guard lock(mu_);
    std::erase_if(engines_, [engine](const Attached& a) { return a.engine == engine; });
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return engines_.size();
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    // Called from civetweb's C code: an exception must not unwind through it.
    try {
      std::lock_guard lock(mu_);
      std::vector<EngineSnapshot> snapshots;
      for (const Attached& a : engines_) snapshots.push_back({a.name, a.engine->stats()});
      return toFamilies(snapshots);
    } catch (const std::exception& e) {
      TENT_ERROR(kMetrics, "scrape failed: %s", e.what());
      return {};
    }
  }

 private:
  struct Attached {
    const TransferEngine* engine;
    std::string name;
  };
  mutable std::mutex mu_;
  std::vector<Attached> engines_;
};

namespace {

constexpr unsigned kCivetIpv6Feature = 8;  // mg_check_feature(): built with USE_IPV6
// Two threads: one slow client cannot hold the only one. A client gets 5 s per request.
const std::vector<std::string> kServerOptions = {"num_threads", "2", "request_timeout_ms", "5000"};

// Where to connect to reach the listener on `listen` (IPv4 "host:port"): its host,
// or loopback for a wildcard. Port 0 here; the bound port is filled in later.
sockaddr_in wakeAddress(const std::string& listen) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string host = listen.substr(0, listen.rfind(':'));
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0 && found != nullptr) {
    const in_addr a = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
    if (a.s_addr != htonl(INADDR_ANY)) addr.sin_addr = a;
  }
  if (found != nullptr) freeaddrinfo(found);
  return addr;
}

// One connection, closed at once: it wakes the listener's poll.
void knock(const sockaddr_in& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  timeval budget{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &budget, sizeof(budget));
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  ::close(fd);
}

// civetweb's listener looks at its stop flag only between polls of up to 2 s (its
// compiled-in SOCKET_TIMEOUT_QUANTUM), so a plain stop takes up to 2 s. While `stop`
// runs, a helper knocks on the port every few ms so the listener sees the flag at once.
void stopWaking(const sockaddr_in& addr, const std::function<void()>& stop) {
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  std::thread knocker([&] {
    std::unique_lock lock(mu);
    while (!stopped) {
      lock.unlock();
      knock(addr);
      lock.lock();
      cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return stopped; });
    }
  });
  stop();
  {
    std::lock_guard lock(mu);
    stopped = true;
  }
  cv.notify_all();
  knocker.join();
}

}  // namespace

class SharedServer {
 public:
  static Result<std::shared_ptr<SharedServer>> start(const std::string& listen);
  ~SharedServer();
  SharedServer(const SharedServer&) = delete;
  SharedServer& operator=(const SharedServer&) = delete;

  StatsCollectable& engines() { return *collectable_; }
  uint16_t port() const noexcept { return port_; }
  const std::string& listen() const noexcept { return listen_; }

 private:
  SharedServer() = default;

  std::string listen_;
  std::shared_ptr<StatsCollectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_ = 0;
  sockaddr_in wake_{};  // where a connection reaches the listener (see the destructor)
};

namespace {
// listen address -> its server while some engine uses it. Servers start and stop with
// this lock held, so a new engine never races a stopping server for the port.
std::mutex g_servers_mu;
std::map<std::string, std::weak_ptr<SharedServer>>& servers() {
  static auto* m = new std::map<std::string, std::weak_ptr<SharedServer>>();
  return *m;
}
}  // namespace

Result<std::shared_ptr<SharedServer>> SharedServer::start(const std::string& listen) {
  const std::string what = "cannot serve metrics on " + listen + ": ";
  if (!listen.empty() && listen.front() == '[' && mg_check_feature(kCivetIpv6Feature) == 0) {
    return Status::NotSupported(what + "this civetweb library is built without IPv6 support");
  }
  std::shared_ptr<SharedServer> e(new SharedServer());
  e->listen_ = listen;
  e->collectable_ = std::make_shared<StatsCollectable>();
  std::vector<std::string> options = {"listening_ports", listen};
  options.insert(options.end(), kServerOptions.begin(), kServerOptions.end());
  std::string messages;
  try {
    CivetCallbacks callbacks;  // copied by the server
    callbacks.log_message = logMessage;
    KeepStartMessages keep(&messages);
    e->exposer_ = std::make_unique<prometheus::Exposer>(std::move(options), &callbacks);
    e->exposer_->RegisterCollectable(e->collectable_);
    const std::vector<int> ports = e->exposer_->GetListeningPorts();
    if (ports.empty()) return Status::Internal(what + "the server reports no listening port");
    e->port_ = static_cast<uint16_t>(ports.front());
    e->wake_ = wakeAddress(listen);
    e->wake_.sin_port = htons(e->port_);
  } catch (const std::exception& x) {
    return Status::Unavailable(what + (messages.empty() ? std::string(x.what()) : messages));
  }
  TENT_INFO(kMetrics, "metrics on http://%s/metrics (port %u)", listen.c_str(),
            static_cast<unsigned>(e->port_));
  return e;
}

SharedServer::~SharedServer() {
  if (!exposer_) return;  // never started
  // Joins civetweb's threads: no scrape reads the engine after this.
  try {
    stopWaking(wake_, [this] { exposer_.reset(); });
  } catch (const std::exception& e) {  // no thread for the knocker: stop the slow way
    TENT_WARN(kMetrics, "stopping the metrics server without waking it: %s", e.what());
    exposer_.reset();
  }
}

}  // namespace tent::metrics

namespace tent::metrics {

Result<std::unique_ptr<Exporter>> Exporter::start(const std::string& listen,
                                                  const TransferEngine& engine) {
  std::lock_guard lock(g_servers_mu);
  std::shared_ptr<SharedServer> server = servers()[listen].lock();
  if (!server) {
    auto started = SharedServer::start(listen);
    if (!started.ok()) {
      servers().erase(listen);
      return started.status();
    }
    server = std::move(started).value();
    servers()[listen] = server;
  }
  server->engines().attach(&engine);
  std::unique_ptr<Exporter> e(new Exporter());
  e->server_ = std::move(server);
  e->engine_ = &engine;
  return e;
}

Exporter::~Exporter() {
  if (!server_) return;
  server_->engines().detach(engine_);  // waits for a scrape reading it
  std::lock_guard lock(g_servers_mu);
  const std::string listen = server_->listen();
  server_.reset();  // the last engine's stops the server, the lock held
  auto it = servers().find(listen);
  if (it != servers().end() && it->second.expired()) servers().erase(it);
}

uint16_t Exporter::port() const noexcept {
  return server_->port();
}

std::string Exporter::address() const {
  const std::string& listen = server_->listen();
  return listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port());
}

size_t attachedEngines(const std::string& listen) {
  std::lock_guard lock(g_servers_mu);
  auto it = servers().find(listen);
  if (it == servers().end()) return 0;
  const std::shared_ptr<SharedServer> server = it->second.lock();
  return server ? server->engines().size() : 0;
}

}  // namespace tent::metrics
