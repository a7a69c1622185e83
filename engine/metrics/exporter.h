// The Prometheus endpoint (metrics.listen): an HTTP server (prometheus-cpp's exposer
// over civetweb, its own threads) answering GET /metrics with a fresh stats() snapshot.
// Nothing is recorded on the datapath: every value is read when a scrape asks.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace tent::metrics {

class Exporter {
 public:
  // Listens on `listen` ("host:port", "[addr]:port"; port 0 = any free port). `engine`
  // must outlive the exporter. Fails (never throws) when the address cannot be bound.
  static Result<std::unique_ptr<Exporter>> start(const std::string& listen,
                                                 const TransferEngine& engine);
  // Stops the server and waits for a scrape in progress, so `engine` may go after it.
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  uint16_t port() const noexcept { return port_; }  // the bound port (port 0 resolved)

 private:
  Exporter() = default;

  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_ = 0;
  sockaddr_in wake_{};  // where a connection reaches the listener (see the destructor)
};

}  // namespace tent::metrics
