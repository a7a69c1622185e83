// RdmaTransport set-up, teardown, poller placement and statistics.
#include "engine/rdma/rdma_transport.h"

#include <poll.h>
#include <unistd.h>

#include <random>

#include "engine/rdma/direct_path.h"
#include "tent/log.h"

namespace tent::rdma {

RdmaTransport::RdmaTransport(std::shared_ptr<const config::Config> config,
                             fabric::Provider& provider, const topology::RailMap& rails)
    : config_(std::move(config)), provider_(provider), rails_(rails) {}

Result<std::unique_ptr<RdmaTransport>> RdmaTransport::create(
    std::shared_ptr<const config::Config> config, fabric::Provider& provider,
    const topology::RailMap& rails) {
  if (provider.deviceCount() == 0) return Status::NotFound("the fabric provider has no device");
  if (provider.deviceCount() > kMaxDevices) return Status::NotSupported("more than 64 devices");
  std::unique_ptr<RdmaTransport> t(new RdmaTransport(std::move(config), provider, rails));
  Status s = t->init();
  if (!s.ok()) return s;
  return t;
}

Status RdmaTransport::init() {
  for (size_t i = 0; i < provider_.deviceCount(); ++i) {
    contexts_.push_back(
        std::make_unique<RdmaContext>(static_cast<uint32_t>(i), provider_.device(i)));
    device_names_.push_back(provider_.device(i).info().name);
  }
  auto runtime = lcore::Runtime::acquire(*config_);
  if (!runtime.ok()) return runtime.status().withContext("lcore runtime");
  runtime_ = std::move(runtime).value();
  TENT_RETURN_IF_ERROR(planPollers());
  for (auto& ctx : contexts_)
    TENT_RETURN_IF_ERROR(ctx->init(*config_, static_cast<uint32_t>(pollers_.size())));
  for (auto& p : pollers_)
    TENT_RETURN_IF_ERROR(
        p->init(config_->workers.ring_size, static_cast<uint32_t>(contexts_.size())));
  slice_pool_ = std::make_unique<SlicePool>(config_->workers.slice_pool);
  direct_ = std::make_unique<DirectPath>(*this);
  TENT_RETURN_IF_ERROR(endpoints_.init(4096));
  instance_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
  local_table_.store(std::make_shared<LocalBufferTable>());
  auto server = metadata::ControlServer::start(
      config_->bootstrap.listen,
      [this](const metadata::ControlFrame& f) { return handleControl(f); },
      config_->bootstrap.advertise_host);
  if (!server.ok()) return server.status().withContext("control listener");
  server_ = std::move(server).value();
  segment_name_ = server_->name();
  publishLocalDescriptor();
  control_thread_ = std::thread([this] { controlLoop(); });
  return attachPollers();
}

RdmaTransport::~RdmaTransport() {
  detachPollers();
  stopping_.store(true);
  if (control_thread_.joinable()) {
    endpoints_.wake();
    control_thread_.join();
  }
  if (server_) server_->stop();
  for (EndpointSlot* slot : endpoints_.allSlots()) {
    RdmaEndPoint* ep = slot->current.load();
    if (ep) (void)ep->destroy(0);
  }
}

Status RdmaTransport::planPollers() {
  std::vector<bool> claimed(contexts_.size(), false);
  auto addPoller = [&](SlicePoller::Kind kind, size_t lcore) {
    pollers_.push_back(
        std::make_unique<SlicePoller>(*this, static_cast<uint32_t>(pollers_.size()), kind, lcore));
    return pollers_.back().get();
  };
  rail_of_context_.assign(contexts_.size(), nullptr);
  for (size_t l = 0; l < runtime_->lcoreCount(); ++l) {
    for (const auto& spec : runtime_->spec(l).pollers) {
      if (spec.kind == config::PollerKind::kBackground) {
        background_.push_back(addPoller(SlicePoller::Kind::kBackground, l));
        continue;
      }
      SlicePoller* rail = nullptr;
      bool matched = false;
      for (size_t c = 0; c < contexts_.size(); ++c) {
        if (spec.device != "*" && spec.device != device_names_[c]) continue;
        matched = true;
        if (claimed[c]) continue;
        if (!rail) rail = addPoller(SlicePoller::Kind::kRail, l);
        rail->addRailContext(contexts_[c].get());
        rail_of_context_[c] = rail;
        claimed[c] = true;
      }
      if (!matched)
        TENT_WARN(kEngine, "lcore %zu: rail:%s names no device of this fabric", l,
                  spec.device.c_str());
    }
  }
  if (background_.empty())
    return Status::InvalidArgument(config_->source +
                                   ": lcores: no background poller; add one to some lcore");
  SlicePoller* fallback = nullptr;
  for (size_t c = 0; c < contexts_.size(); ++c) {
    if (claimed[c]) continue;
    TENT_WARN(kEngine, "context %s has no rail poller; adding one on lcore 0",
              device_names_[c].c_str());
    if (!fallback) fallback = addPoller(SlicePoller::Kind::kRail, 0);
    fallback->addRailContext(contexts_[c].get());
    rail_of_context_[c] = fallback;
  }
  return Status::OK();
}

Status RdmaTransport::attachPollers() {
  for (auto& p : pollers_) {
    Status s = runtime_->attach(p->lcore(), p.get());
    if (!s.ok()) {
      detachPollers();
      return s.withContext("attach " + std::string(p->name()));
    }
  }
  return Status::OK();
}

void RdmaTransport::detachPollers() {
  if (!runtime_) return;
  for (auto& p : pollers_) (void)runtime_->detach(p->lcore(), p.get());
}

size_t RdmaTransport::stepPollers() {
  size_t busy = 0;
  for (size_t l = 0; l < runtime_->lcoreCount(); ++l) busy += runtime_->runOnce(l);
  return busy;
}

void RdmaTransport::controlLoop() {
  while (!stopping_.load()) {
    pollfd p{endpoints_.wakeFd(), POLLIN, 0};
    (void)::poll(&p, 1, 20);
    uint64_t drained;
    (void)!::read(endpoints_.wakeFd(), &drained, sizeof drained);
    while (!stopping_.load()) {
      EndpointSlot* slot = endpoints_.nextQueued();
      if (!slot) break;
      serviceSlot(slot);
    }
  }
}

namespace {
std::string pollerNames(const std::vector<std::unique_ptr<SlicePoller>>& pollers, size_t lcore) {
  std::string out;
  for (const auto& p : pollers) {
    if (p->lcore() != lcore) continue;
    if (!out.empty()) out += ",";
    if (p->kind() == SlicePoller::Kind::kBackground) {
      out += "background";
      continue;
    }
    out += "rail:";
    for (size_t i = 0; i < p->railContexts().size(); ++i)
      out += (i ? "+" : "") + p->railContexts()[i]->name();
  }
  return out;
}
}  // namespace

void RdmaTransport::fillStats(EngineStats* out) const {
  out->provider = std::string(provider_.name());
  out->link_model = provider_.linkModel();
  out->devices = device_names_;
  for (size_t l = 0; l < runtime_->lcoreCount(); ++l) {
    LcoreStatsView v;
    v.lcore = static_cast<unsigned>(l);
    v.cpu = runtime_->cpuOf(l);
    v.pollers = pollerNames(pollers_, l);
    auto st = runtime_->stats(l);
    v.busy_cycles = st.busy_cycles;
    v.idle_cycles = st.idle_cycles;
    out->lcores.push_back(v);
  }
  out->worker.tasks = worker_tasks_.load(std::memory_order_relaxed);
  for (const auto& p : pollers_) {
    const auto& c = p->counters();
    out->worker.slices_posted += c.slices_posted.load(std::memory_order_relaxed);
    out->worker.slices_completed += c.slices_completed.load(std::memory_order_relaxed);
    out->worker.slice_errors += c.slice_errors.load(std::memory_order_relaxed);
    out->worker.slice_retries += c.slice_retries.load(std::memory_order_relaxed);
    out->worker.foreground_fallback_slices += c.foreground_slices.load(std::memory_order_relaxed);
    out->bytes_transferred += c.bytes.load(std::memory_order_relaxed);
  }
  direct_->fillStats(&out->direct);
  out->bytes_transferred += direct_->counters().bytes.load(std::memory_order_relaxed);
}

}  // namespace tent::rdma
