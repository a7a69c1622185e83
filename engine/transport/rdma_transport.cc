// RdmaTransport set-up, teardown, poller placement and statistics.
#include "transport/rdma_transport.h"

#include <new>
#include "base/ebr.h"
#include "model/slicing.h"
#include "tent/log.h"
#include "topology/location_check.h"

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
  for (size_t i = 0; i < provider_.deviceCount(); ++i)
    contexts_.push_back(
        std::make_unique<RdmaContext>(static_cast<uint32_t>(i), provider_.device(i)));
  auto runtime = lcore::Runtime::acquire(*config_);
  if (!runtime.ok()) return runtime.status().withContext("lcore runtime");
  runtime_ = std::move(runtime).value();
  std::vector<RdmaContext*> raw;
  for (auto& c : contexts_) raw.push_back(c.get());
  TENT_RETURN_IF_ERROR(makeSlicePool());
  segments_ = std::make_unique<SegmentTable>(config_->bootstrap.max_segments);
  requests_ = std::make_unique<ControlRequests>();
  TENT_RETURN_IF_ERROR(
      requests_->init(4096, uint64_t{config_->bootstrap.descriptor_refresh_ms} * 1'000'000));
  // One WR carries at most the smallest max message size of the devices (and what an
  // SGE's 32-bit length holds): slices are cut to it, never truncated.
  uint64_t max_wr = uint64_t{1} << 31;
  std::string smallest = "the SGE limit";
  for (auto& c : contexts_) {
    const uint64_t m = c->device().info().max_message_bytes;
    if (m != 0 && m < max_wr) {
      max_wr = m;
      smallest = c->name();
    }
  }
  if (config_->workers.block_size > max_wr)
    return Status::InvalidArgument(
        config_->source + ": workers.block_size " + std::to_string(config_->workers.block_size) +
        " exceeds the max message size of " + smallest + " (" + std::to_string(max_wr) +
        " bytes): one slice is one WR; lower workers.block_size");
  datapath_ = std::make_unique<DatapathContext>(*config_, rails_, raw, *segments_, *slice_pool_,
                                                *requests_, max_wr);
  direct_ = std::make_unique<DirectPath>(*datapath_);
  TENT_RETURN_IF_ERROR(planPollers());
  TENT_RETURN_IF_ERROR(initContexts());
  local_ = std::make_unique<LocalMemory>(raw, rails_);
  submitter_ = std::make_unique<Submitter>(*config_, *datapath_, *direct_, *local_, *requests_,
                                           runtime_->manual());

  control::ControlPlaneDeps deps{*config_, raw, {}, background_, *segments_, *requests_, *local_};
  for (SlicePoller* rail : rail_of_context_)
    deps.rail_poller_of_context.push_back(rail->postingIndex());
  deps.direct_enabled = directEnabled();
  auto control = control::ControlPlane::create(std::move(deps));
  if (!control.ok()) return control.status();
  control_ = std::move(control).value();
  local_->onChange([this] { control_->localChanged(); });
  return attachPollers();
}

// The one large allocation of engine start (workers.slice_pool up to 16 M slices,
// about 1.8 GiB): a machine that cannot give it gets a Status, not std::bad_alloc.
Status RdmaTransport::makeSlicePool() {
  try {
    slice_pool_ = std::make_unique<SlicePool>(config_->workers.slice_pool);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(
        config_->source + ": workers.slice_pool: " + std::to_string(config_->workers.slice_pool) +
        " slices (" +
        std::to_string(uint64_t{config_->workers.slice_pool} * sizeof(RdmaSlice) >> 20) +
        " MiB) cannot be allocated; lower it");
  }
  return Status::OK();
}

RdmaTransport::~RdmaTransport() {
  detachPollers();  // first: after this no lcore touches an endpoint
  if (control_) control_->shutdown();
}

Status RdmaTransport::planPollers() {
  std::vector<bool> claimed(contexts_.size(), false);
  auto addPoller = [&](SlicePoller::Kind kind, size_t lcore) {
    DirectPath* direct = kind == SlicePoller::Kind::kRail ? direct_.get() : nullptr;
    pollers_.push_back(std::make_unique<SlicePoller>(
        *datapath_, direct, static_cast<uint32_t>(pollers_.size()), kind, lcore));
    return pollers_.back().get();
  };
  rail_of_context_.assign(contexts_.size(), nullptr);
  for (size_t l = 0; l < runtime_->lcoreCount(); ++l) {
    for (const auto& spec : runtime_->spec(l).pollers) {
      if (spec.kind == config::PollerKind::kBackground) {
        background_.push_back(addPoller(SlicePoller::Kind::kBackground, l)->postingIndex());
        continue;
      }
      SlicePoller* rail = nullptr;
      bool matched = false;
      for (size_t c = 0; c < contexts_.size(); ++c) {
        if (spec.device != "*" && spec.device != contexts_[c]->name()) continue;
        matched = true;
        if (claimed[c]) continue;
        if (!rail) rail = addPoller(SlicePoller::Kind::kRail, l);
        rail->addRailContext(contexts_[c].get());
        rail_of_context_[c] = rail;
        claimed[c] = true;
      }
      if (!matched) {
        std::string names;
        for (const auto& c : contexts_) names += (names.empty() ? "" : ", ") + c->name();
        return Status::NotFound(config_->source + ": lcores[" + std::to_string(l) +
                                "]: rail:" + spec.device + " names no device of the " +
                                std::string(provider_.name()) + " provider (devices: " + names +
                                ")");
      }
    }
  }
  if (background_.empty())
    return Status::InvalidArgument(config_->source +
                                   ": lcores: no background poller; add one to some lcore");
  SlicePoller* fallback = nullptr;
  for (size_t c = 0; c < contexts_.size(); ++c) {
    if (claimed[c]) continue;
    TENT_WARN(kEngine, "context %s has no rail poller; adding one on lcore 0",
              contexts_[c]->name().c_str());
    if (!fallback) fallback = addPoller(SlicePoller::Kind::kRail, 0);
    fallback->addRailContext(contexts_[c].get());
    rail_of_context_[c] = fallback;
  }
  std::vector<SlicePoller*> by_index;
  for (auto& p : pollers_) by_index.push_back(p.get());
  datapath_->setPollers(std::move(by_index), rail_of_context_);
  return Status::OK();
}

// Each context gets a data CQ for every background poller and for its own rail
// poller, each sized for what may attach to it (config::cqSizing).
Status RdmaTransport::initContexts() {
  const config::CqSizing z = config::cqSizing(*config_);
  for (size_t c = 0; c < contexts_.size(); ++c) {
    RdmaContext::CqPlan plan;
    for (auto& p : pollers_) {
      uint32_t depth = 0;
      if (p->kind() == SlicePoller::Kind::kBackground) depth = z.background_cq;
      if (p.get() == rail_of_context_[c]) depth = z.rail_cq;
      plan.data_cq_depth.push_back(depth);
    }
    plan.direct_cq_depth = z.direct_cq;
    plan.passive_cq_depth = z.passive_cq;
    plan.lane_depth = config_->direct.qp_depth;
    TENT_RETURN_IF_ERROR(contexts_[c]->init(plan));
  }
  const config::NotifyConfig& n = config_->notify;
  inbox_ = std::make_unique<notify::Inbox>(n.inbox_count, n.inbox_bytes, notify_counters_);
  if (n.enabled) {
    for (auto& c : contexts_) c->setNotify({{n.max_message_bytes, n.credits}, inbox_.get()});
  }
  for (auto& p : pollers_)
    TENT_RETURN_IF_ERROR(
        p->init(config_->workers.ring_size, static_cast<uint32_t>(contexts_.size())));
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

Status RdmaTransport::registerBuffer(void* addr, size_t length, const Location& location,
                                     bool engine_allocated, MemoryAccess access,
                                     const std::string& name) {
  TENT_RETURN_IF_ERROR(topology::checkLocation(rails_, location).withContext("register"));
  return local_->registerBuffer(addr, length, location, engine_allocated, access, name);
}

Status RdmaTransport::unregisterBuffer(void* addr, UnregisterMode mode) {
  return local_->unregisterBuffer(addr, mode,
                                  uint64_t{config_->timeouts.unregister_drain_ms} * 1'000'000);
}

Result<std::vector<SegmentBufferInfo>> RdmaTransport::segmentBuffers(SegmentId id) {
  auto snapshot = [&]() -> std::shared_ptr<const PeerSegment> {
    ebr::ReadSection section;
    SegmentRecord* rec = segments_->find(id);
    return rec ? rec->peer() : nullptr;
  };
  auto seg = snapshot();
  if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  if (seg->descriptor.buffers.empty() && id != LOCAL_SEGMENT_ID) {
    // The peer may have registered memory after we opened it: refetch once.
    if (control_->refreshSegment(id).ok()) seg = snapshot();
    if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  }
  return segmentBufferInfos(seg->descriptor);
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
  out->paths = "direct.mode=" + std::string(config::toString(config_->direct.mode)) +
               " workers.priority_lane=" + (datapath_->priorityLane() ? "on" : "off") +
               (config_->workers.priority_lane == config::PriorityLane::kAuto ? " (auto)" : "");
  for (const auto& c : contexts_) out->devices.push_back(c->name());
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
  out->worker.tasks = submitter_->workerTasks();
  for (const auto& p : pollers_) {
    const auto& c = p->counters();
    out->worker.slices_posted += c.slices_posted.load(std::memory_order_relaxed);
    out->worker.slices_completed += c.slices_completed.load(std::memory_order_relaxed);
    out->worker.slice_errors += c.slice_errors.load(std::memory_order_relaxed);
    out->worker.slice_retries += c.slice_retries.load(std::memory_order_relaxed);
    out->worker.foreground_fallback_slices += c.foreground_slices.load(std::memory_order_relaxed);
    out->bytes_transferred += c.bytes.load(std::memory_order_relaxed);
    out->device_events.failed_slices += c.dead_device_failures.load(std::memory_order_relaxed);
  }
  out->device_events.failed_direct =
      direct_->counters().dead_device_failures.load(std::memory_order_relaxed);
  direct_->fillStats(&out->direct);
  out->bytes_transferred += direct_->counters().bytes.load(std::memory_order_relaxed);
  const CompletionCounters& done = datapath_->completions();
  for (size_t c = 0; c < contexts_.size(); ++c) {
    out->bytes_per_device[contexts_[c]->name()] += done.bytesOnDevice(c);
    addTargetCounts(contexts_[c]->device().counters(), &out->target);
  }
  out->bytes_per_intent.assign(kIntentCount, 0);
  for (size_t i = 0; i < kIntentCount; ++i) out->bytes_per_intent[i] = done.bytesOfIntent(i);
  out->deadlines.expired_at_submit = done.deadlinesExpiredAtSubmit();
  out->deadlines.missed = done.deadlinesMissed();
  const notify::Counters& n = notify_counters_;
  out->notify.sent = n.sent.load(std::memory_order_relaxed);
  out->notify.sent_bytes = n.sent_bytes.load(std::memory_order_relaxed);
  out->notify.received = n.received.load(std::memory_order_relaxed);
  out->notify.received_bytes = n.received_bytes.load(std::memory_order_relaxed);
  out->notify.refused = n.refused.load(std::memory_order_relaxed);
  out->notify.unsupported = n.unsupported.load(std::memory_order_relaxed);
  out->notify.failed = n.failed.load(std::memory_order_relaxed);
  out->notify.dropped_batches = n.dropped_batches.load(std::memory_order_relaxed);
  out->notify.held = inbox_->held();
  control_->fillStats(out);
}

}  // namespace tent::rdma
