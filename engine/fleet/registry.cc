#include "fleet/registry.h"

#include "base/bounded_file.h"
#include "base/clock.h"
#include "tent/log.h"

namespace tent::fleet {

namespace {

uint64_t backoffNs(uint32_t failures, uint32_t initial_ms, uint32_t max_ms, std::mt19937_64& rng) {
  uint64_t d = uint64_t{initial_ms} * 1'000'000;
  const uint64_t cap = uint64_t{max_ms} * 1'000'000;
  for (uint32_t i = 0; i < failures && d < cap; ++i) d *= 2;
  if (d > cap) d = cap;
  return d / 2 + rng() % (d / 2 + 1);
}

}  // namespace

Registry::Registry(control::EventLoop& loop, const config::MetadataConfig& config,
                   const control::Secret& secret, FleetCounters& counters)
    : loop_(loop),
      config_(config),
      secret_(secret),
      counters_(counters),
      segments_prefix_(config.etcd.prefix + "segments/") {}

Result<std::unique_ptr<Registry>> Registry::create(control::EventLoop& loop,
                                                   const config::MetadataConfig& config,
                                                   const control::Secret& secret,
                                                   FleetCounters& counters) {
  std::string password;
  if (!config.etcd.password_file.empty()) {
    BoundedFileOptions o;
    o.max_bytes = 4096;
    TENT_ASSIGN_OR_RETURN(BoundedFile f, readBoundedFile(config.etcd.password_file,
                                                         "metadata.etcd.password_file", o));
    password = std::move(f.bytes);
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r'))
      password.pop_back();
  }
  std::unique_ptr<Registry> r(new Registry(loop, config, secret, counters));
  TENT_ASSIGN_OR_RETURN(r->etcd_, EtcdClient::create(loop, config.etcd, std::move(password)));
  return r;
}

Registry::~Registry() {
  *alive_ = false;
  if (timer_ != 0) loop_.cancelTimer(timer_);
  if (watch_timer_ != 0) loop_.cancelTimer(watch_timer_);
  etcd_.reset();
}

void Registry::setUp(bool up) {
  up_ = up;
  counters_.store_up.store(up, std::memory_order_relaxed);
}

void Registry::start(Entry own, PeerEvents events) {
  own_ = std::move(own);
  events_ = std::move(events);
  grant();
}

void Registry::updateOwn(std::vector<uint8_t> descriptor) {
  own_.descriptor = std::move(descriptor);
  if (registering_) {
    own_dirty_ = true;  // a put is in flight with the old bytes: put again after it
    return;
  }
  if (up_) putEntry();  // away: the next registration puts the new one
}

void Registry::grant() {
  timer_ = 0;
  if (stopping_) return;
  registering_ = true;
  etcd_->leaseGrant(config_.etcd.lease_ttl_s, [this, alive = alive_](Result<int64_t> id) {
    if (!*alive) return;
    if (!id.ok()) return storeAway(id.status().withContext("etcd lease grant"));
    lease_ = *id;
    putEntry();
  });
}

void Registry::putEntry() {
  registering_ = true;
  own_dirty_ = false;
  etcd_->put(keyOf(own_.name), encodeEntry(own_, secret_), lease_,
             [this, alive = alive_](Status s) {
               if (!*alive) return;
               registering_ = false;
               if (!s.ok()) return storeAway(s.withContext("etcd put " + keyOf(own_.name)));
               onRegistered();
             });
}

void Registry::onRegistered() {
  FleetCounters::bump(counters_.registrations);
  if (!up_)
    TENT_INFO(kEngine, "fleet: registered as %s in etcd (lease %lld, TTL %u s)", own_.name.c_str(),
              static_cast<long long>(lease_), config_.etcd.lease_ttl_s);
  setUp(true);
  failures_ = 0;
  if (watch_ == 0 && watch_timer_ == 0) startWatch();
  scheduleKeepAlive();
  if (own_dirty_) putEntry();
}

void Registry::scheduleKeepAlive() {
  if (timer_ != 0) loop_.cancelTimer(timer_);
  const uint64_t period = uint64_t{config_.etcd.lease_ttl_s} * 1'000'000'000 / 3;
  timer_ = loop_.addTimer(clock::monotonicNs() + period, [this] {
    timer_ = 0;
    keepAlive();
  });
}

void Registry::keepAlive() {
  if (stopping_) return;
  etcd_->keepAlive(lease_, [this, alive = alive_](Result<int64_t> ttl) {
    if (!*alive) return;
    if (!ttl.ok()) return storeAway(ttl.status().withContext("etcd lease keepalive"));
    if (*ttl <= 0) {
      // etcd does not know the lease: it expired while we could not reach etcd, or
      // etcd lost its data. Register again.
      TENT_INFO(kEngine, "fleet: etcd no longer knows lease %lld; registering again",
                static_cast<long long>(lease_));
      // etcd may have lost its data: its revisions started over, so the watch does too.
      restartWatchFromNow();
      return grant();
    }
    FleetCounters::bump(counters_.lease_renewals);
    scheduleKeepAlive();
  });
}

void Registry::storeAway(const Status& why) {
  registering_ = false;
  FleetCounters::bump(counters_.store_errors);
  last_error_ = why.toString();
  if (up_ || failures_ == 0)  // once when it goes away, and a first registration's failure
    TENT_WARN(kEngine,
              "fleet: etcd unreachable (%s); open segments keep working, lookups fail "
              "until it answers again",
              why.toString().c_str());
  setUp(false);
  if (stopping_) return;
  const uint64_t delay =
      backoffNs(failures_++, config_.etcd.retry_initial_ms, config_.etcd.retry_max_ms, rng_);
  if (timer_ != 0) loop_.cancelTimer(timer_);
  timer_ = loop_.addTimer(clock::monotonicNs() + delay, [this] { grant(); });
}

void Registry::startWatch() {
  watch_timer_ = 0;
  if (stopping_) return;
  const int64_t from = watch_revision_ > 0 ? watch_revision_ + 1 : 0;
  watch_ = etcd_->watch(
      segments_prefix_, from,
      [this, alive = alive_](WatchMessage m) {
        if (*alive) onWatch(m);
      },
      [this, alive = alive_](Status why) {
        if (!*alive) return;
        watch_ = 0;
        if (stopping_) return;
        FleetCounters::bump(counters_.watch_restarts);
        TENT_INFO(kEngine, "fleet: watch ended (%s); restarting", why.toString().c_str());
        const uint64_t delay =
            backoffNs(failures_, config_.etcd.retry_initial_ms, config_.etcd.retry_max_ms, rng_);
        watch_timer_ = loop_.addTimer(clock::monotonicNs() + delay, [this] { startWatch(); });
      });
}

void Registry::restartWatchFromNow() {
  watch_revision_ = 0;
  if (watch_ != 0) etcd_->cancel(watch_);  // its end restarts it, from now
}

void Registry::onWatch(const WatchMessage& m) {
  if (m.canceled) {  // etcd ended it (a compacted revision): start again from now
    FleetCounters::bump(counters_.watch_restarts);
    return restartWatchFromNow();
  }
  if (m.revision > watch_revision_) watch_revision_ = m.revision;
  for (const WatchEvent& e : m.events) {
    if (e.kv.key.rfind(segments_prefix_, 0) != 0) continue;
    const std::string name = e.kv.key.substr(segments_prefix_.size());
    if (name == own_.name) continue;
    FleetCounters::bump(counters_.watch_events);
    if (e.deleted) {
      if (events_.removed) events_.removed(name);
      continue;
    }
    auto entry = decodeEntry(name, e.kv.value, secret_);
    if (!entry.ok()) {
      FleetCounters::bump(counters_.entries_refused);
      TENT_WARN(kEngine, "fleet: %s", entry.status().toString().c_str());
      continue;
    }
    if (events_.changed) events_.changed(*entry);
  }
}

void Registry::lookup(const std::string& name, std::function<void(Result<Entry>)> done) {
  // Refused at once only when etcd was found away: before our first registration
  // answered (a process that initializes and opens a peer at once, as Mooncake's
  // users do) the lookup goes to etcd like any other.
  if (!up_ && !last_error_.empty()) {
    FleetCounters::bump(counters_.lookups_refused_away);
    return done(
        Status::Unavailable("segment " + name +
                            ": etcd is unreachable (metadata.etcd.endpoints); open segments "
                            "keep working, new lookups fail until it answers again" +
                            (last_error_.empty() ? "" : "; last error: " + last_error_)));
  }
  FleetCounters::bump(counters_.lookups);
  etcd_->range(keyOf(name), [this, alive = alive_, name,
                             done = std::move(done)](Result<std::vector<KeyValue>> kvs) {
    if (!*alive) return done(Status::Canceled("engine closing"));
    if (!kvs.ok()) return done(kvs.status().withContext("look up segment " + name));
    if (kvs->empty())
      return done(Status::NotFound("no segment named '" + name + "' is registered in etcd under " +
                                   segments_prefix_));
    auto entry = decodeEntry(name, kvs->front().value, secret_);
    if (!entry.ok() && entry.status().code() == StatusCode::kPermissionDenied)
      FleetCounters::bump(counters_.entries_refused);
    done(std::move(entry));
  });
}

void Registry::stop(std::function<void()> done) {
  stopping_ = true;
  if (timer_ != 0) loop_.cancelTimer(timer_);
  timer_ = 0;
  if (watch_ != 0) etcd_->cancel(watch_);
  if (!up_ || lease_ == 0) return done();
  // Revoking the lease removes our entry now: peers' watches see us go at once.
  etcd_->revoke(lease_, [alive = alive_, done = std::move(done)](Status) {
    if (*alive) done();
  });
}

}  // namespace tent::fleet
