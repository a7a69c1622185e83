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

class StatsCollectable final : public prometheus::Collectable {
 public:
  explicit StatsCollectable(const TransferEngine& engine) : engine_(engine) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    // Called from civetweb's C code: an exception must not unwind through it.
    try {
      return toFamilies(engine_.stats());
    } catch (const std::exception& e) {
      TENT_ERROR(kMetrics, "scrape failed: %s", e.what());
      return {};
    }
  }

 private:
  const TransferEngine& engine_;
};

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

Result<std::unique_ptr<Exporter>> Exporter::start(const std::string& listen,
                                                  const TransferEngine& engine) {
  const std::string what = "cannot serve metrics on " + listen + ": ";
  if (!listen.empty() && listen.front() == '[' && mg_check_feature(kCivetIpv6Feature) == 0) {
    return Status::NotSupported(what + "this civetweb library is built without IPv6 support");
  }
  std::unique_ptr<Exporter> e(new Exporter());
  e->collectable_ = std::make_shared<StatsCollectable>(engine);
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

Exporter::~Exporter() {
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
