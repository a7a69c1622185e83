// The Prometheus endpoint (metrics.listen): an HTTP server (prometheus-cpp's exposer
// over civetweb, its own threads) answering GET /metrics with a fresh stats() snapshot
// of every engine attached to it. One server per listen address and process: engines
// of one process with the same metrics.listen share it, each series labelled with the
// engine's segment name (`engine`). Nothing is recorded on the datapath: every value
// is read when a scrape asks.
#pragma once

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

class SharedServer;  // exporter.cc: one per listen address in the process

// One engine's place on the process's server for `listen`.
class Exporter {
 public:
  // Attaches `engine` under the label engine="<engine.segmentName()>" to the server
  // for `listen` ("host:port", "[addr]:port"; port 0 = any free port), starting it when
  // no engine of this process serves that address yet. `engine` must outlive the
  // exporter. Fails (never throws) when the address cannot be bound.
  static Result<std::unique_ptr<Exporter>> start(const std::string& listen,
                                                 const TransferEngine& engine);
  // Detaches the engine, waiting for a scrape in progress, so `engine` may go after
  // it; the last engine of a server stops it.
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  uint16_t port() const noexcept;  // the bound port (port 0 resolved)
  std::string address() const;     // "host:port" of `listen`, port 0 resolved

 private:
  Exporter() = default;

  std::shared_ptr<SharedServer> server_;
  const TransferEngine* engine_ = nullptr;
};

// The server the process's engines share, for tests: how many engines it serves.
size_t attachedEngines(const std::string& listen);

}  // namespace tent::metrics
