// The loopback fabric: its devices (attributes, port, GID table, a fake sysfs tree
// for NUMA node, PCI address and port counters), the contract-break policy, and
// the public LoopbackVerbs face.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fabric/verbs/verbs_ops.h"
#include "loopback_internal.h"

namespace tent::fabric::testing::loopback {

namespace {

std::atomic<Fabric*> g_current{nullptr};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "loopback verbs: %s\n", what.c_str());
  std::abort();
}

ibv_gid gidFromText(const std::string& text) {
  ibv_gid gid{};
  if (inet_pton(AF_INET6, text.c_str(), gid.raw) != 1) die("bad GID text " + text);
  return gid;
}

void writeFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0)
    die("cannot write " + path);
}

// Fixed width, so a later value never leaves digits of an earlier one behind.
void writeCounter(int fd, uint64_t value) noexcept {
  char text[32];
  int n = std::snprintf(text, sizeof(text), "%020llu\n", static_cast<unsigned long long>(value));
  (void)!pwrite(fd, text, static_cast<size_t>(n), 0);
}

std::string makeTempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tent-loopback-verbs-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) die("mkdtemp " + pattern + ": " + std::strerror(errno));
  return pattern;
}

}  // namespace

Fabric* currentFabric() noexcept {
  return g_current.load(std::memory_order_acquire);
}

bool claimCurrentFabric(Fabric* fabric) noexcept {
  Fabric* none = nullptr;
  return g_current.compare_exchange_strong(none, fabric, std::memory_order_acq_rel);
}

void releaseCurrentFabric(Fabric* fabric) noexcept {
  g_current.compare_exchange_strong(fabric, nullptr, std::memory_order_acq_rel);
}

bool Device::ownsGid(const ibv_gid& gid) const noexcept {
  std::lock_guard<std::mutex> lock(gid_mu);
  for (int i = 0; i < kGidTableLength; ++i) {
    if (gid_used[i] && std::memcmp(gids[i].gid.raw, gid.raw, sizeof(gid.raw)) == 0) return true;
  }
  return false;
}

void Device::countTraffic(uint64_t xmit_bytes, uint64_t rcv_bytes) noexcept {
  std::lock_guard<std::mutex> lock(counter_mu);
  if (xmit_bytes != 0) writeCounter(xmit_fd, xmit_words += xmit_bytes / 4);
  if (rcv_bytes != 0) writeCounter(rcv_fd, rcv_words += rcv_bytes / 4);
}

Fabric::Fabric(LoopbackOptions opts) : options(std::move(opts)), policy(options.on_contract_break) {
  if (options.devices.empty()) die("a fabric needs at least one device");
  sysfs_root = makeTempRoot();
  for (uint32_t i = 0; i < options.devices.size(); ++i) buildDevice(i, options.devices[i]);
}

Fabric::~Fabric() {
  for (auto& d : devices) {
    if (d->xmit_fd >= 0) ::close(d->xmit_fd);
    if (d->rcv_fd >= 0) ::close(d->rcv_fd);
  }
  std::error_code ignored;
  std::filesystem::remove_all(sysfs_root, ignored);
}

// Attributes of a ConnectX-like 100 Gb/s port. RoCE devices carry four GIDs
// (link-local and IPv4-mapped, each as RoCE v1 and v2) like a RoCE netdev with one
// address; IB devices a LID and one link-local GID. Every GID names its device.
void Fabric::buildDevice(uint32_t index, const LoopbackDeviceSpec& spec) {
  if (spec.name.empty() || spec.name.size() >= IBV_SYSFS_NAME_MAX) die("bad device name");
  for (auto& other : devices) {
    if (other->spec.name == spec.name) die("duplicate device " + spec.name);
  }
  auto d = std::make_unique<Device>();
  d->fabric = this;
  d->index = index;
  d->spec = spec;
  d->handle.self = d.get();
  ibv_device& dev = d->handle.ibv;
  dev.node_type = IBV_NODE_CA;
  dev.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(dev.name, sizeof(dev.name), "%s", spec.name.c_str());
  std::snprintf(dev.dev_name, sizeof(dev.dev_name), "uverbs%u", index);

  ibv_device_attr& a = d->attr;
  std::snprintf(a.fw_ver, sizeof(a.fw_ver), "loopback-1.0");
  a.node_guid = a.sys_image_guid = htobe64(0x0002c90300000000ull | (index + 1));
  a.max_mr_size = uint64_t{1} << 40;
  a.page_size_cap = 0xfffff000;
  a.vendor_id = 0x02c9;
  a.max_qp = 1 << 16;
  a.max_qp_wr = kMaxQpWr;
  a.max_sge = kMaxSge;
  a.max_sge_rd = kMaxSge;
  a.max_cq = 1 << 16;
  a.max_cqe = kMaxCqe;
  a.max_mr = 1 << 20;
  a.max_pd = 1 << 16;
  a.max_qp_rd_atom = kMaxRdAtomic;
  a.max_qp_init_rd_atom = kMaxRdAtomic;
  a.max_res_rd_atom = kMaxRdAtomic * (1 << 16);
  a.phys_port_cnt = 1;
  a.max_pkeys = 1;

  ibv_port_attr& p = d->port;
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = kGidTableLength;
  p.max_msg_sz = kMaxMessage;
  p.pkey_tbl_len = 1;
  p.active_width = 2;   // 4x
  p.active_speed = 32;  // EDR: 25 Gb/s per lane
  p.phys_state = 5;     // LinkUp
  p.link_layer = spec.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  auto setGid = [&](int i, ibv_gid_type type, const std::string& text) {
    d->gids[i].gid = gidFromText(text);
    d->gids[i].gid_index = static_cast<uint32_t>(i);
    d->gids[i].port_num = 1;
    d->gids[i].gid_type = type;
    d->gids[i].ndev_ifindex = spec.roce ? kNetdevIfindexBase + index : 0;
    d->gid_used[i] = true;
  };
  const std::string n = std::to_string(index + 1);
  if (spec.roce) {
    setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::2:0:0:" + n);
    setGid(1, IBV_GID_TYPE_ROCE_V2, "fe80::2:0:0:" + n);
    setGid(2, IBV_GID_TYPE_ROCE_V1, "::ffff:10.77.0." + n);
    setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.77.0." + n);
  } else {
    p.lid = static_cast<uint16_t>(index + 1);
    p.sm_lid = 1;
    setGid(0, IBV_GID_TYPE_IB, "fe80::2:c903:0:" + n);
  }
  buildSysfs(*d);
  devices.push_back(std::move(d));
}

// <root>/<name>/device -> <root>/pci/0000:00:<10+i>.0 (holding numa_node), and
// <root>/<name>/ports/1/counters/port_{xmit,rcv}_data, kept open for updates.
void Fabric::buildSysfs(Device& d) {
  char pci[32];
  std::snprintf(pci, sizeof(pci), "0000:00:%02x.0", 0x10 + d.index);
  const std::string pci_dir = sysfs_root + "/pci/" + pci;
  const std::string dev_dir = sysfs_root + "/" + d.spec.name;
  const std::string counters = dev_dir + "/ports/1/counters";
  std::filesystem::create_directories(pci_dir);
  std::filesystem::create_directories(counters);
  writeFile(pci_dir + "/numa_node", std::to_string(d.spec.numa_node) + "\n");
  std::filesystem::create_directory_symlink(pci_dir, dev_dir + "/device");
  d.xmit_fd = ::open((counters + "/port_xmit_data").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  d.rcv_fd = ::open((counters + "/port_rcv_data").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (d.xmit_fd < 0 || d.rcv_fd < 0) die("cannot create counters in " + counters);
  writeCounter(d.xmit_fd, 0);
  writeCounter(d.rcv_fd, 0);
  if (dev_dir.size() >= sizeof(d.handle.ibv.ibdev_path)) die("sysfs path too long: " + dev_dir);
  std::snprintf(d.handle.ibv.ibdev_path, sizeof(d.handle.ibv.ibdev_path), "%s", dev_dir.c_str());
  std::snprintf(d.handle.ibv.dev_path, sizeof(d.handle.ibv.dev_path), "%s", dev_dir.c_str());
}

Mr* Fabric::findMr(const Device& d, uint32_t k) const noexcept {
  auto it = mrs.find(key(d, k));
  return it == mrs.end() ? nullptr : it->second;
}

uint64_t Fabric::now() const noexcept {
  if (options.clock) return options.clock();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

const Device* Fabric::deviceByGid(const ibv_gid& gid) const noexcept {
  for (const auto& d : devices) {
    if (d->ownsGid(gid)) return d.get();
  }
  return nullptr;
}

const Device* Fabric::deviceByLid(uint16_t lid) const noexcept {
  for (const auto& d : devices) {
    if (d->port.link_layer == IBV_LINK_LAYER_INFINIBAND && d->port.lid == lid) return d.get();
  }
  return nullptr;
}

// The first few of a kind are printed; every one is counted.
void Fabric::contractBreak(std::atomic<uint64_t>& counter, const char* what) noexcept {
  constexpr uint64_t kPrinted = 5;
  const bool abort = policy.load(std::memory_order_relaxed) == OnContractBreak::kAbort;
  const uint64_t seen = counter.fetch_add(1, std::memory_order_relaxed);
  if (abort || seen < kPrinted) std::fprintf(stderr, "loopback verbs: CONTRACT BREAK: %s\n", what);
  if (abort) {
    std::error_code ignored;
    std::filesystem::remove_all(sysfs_root, ignored);  // the one thing abort() would leave
    std::abort();
  }
  if (seen + 1 == kPrinted) std::fprintf(stderr, "loopback verbs: (further ones only counted)\n");
}

}  // namespace tent::fabric::testing::loopback

namespace tent::fabric::testing {

LoopbackVerbs::LoopbackVerbs(LoopbackOptions options)
    : fabric_(std::make_unique<loopback::Fabric>(std::move(options))) {
  if (!loopback::claimCurrentFabric(fabric_.get())) {
    std::fprintf(stderr, "loopback verbs: a second fabric in one process\n");
    std::abort();
  }
}

namespace {

// Says on stderr which objects are still alive, if any; true when some are.
bool reportLive(const LoopbackStats& s, const char* when) {
  if (s.open_contexts + s.pds + s.mrs + s.cqs + s.qps == 0) return false;
  std::fprintf(stderr,
               "loopback verbs: %s: %lld contexts, %lld PDs, %lld MRs, %lld CQs, %lld QPs still "
               "alive\n",
               when, static_cast<long long>(s.open_contexts), static_cast<long long>(s.pds),
               static_cast<long long>(s.mrs), static_cast<long long>(s.cqs),
               static_cast<long long>(s.qps));
  return true;
}

}  // namespace

LoopbackVerbs::~LoopbackVerbs() {
  if (reportLive(stats(), "fabric destroyed before its objects")) std::abort();
  loopback::releaseCurrentFabric(fabric_.get());
}

const VerbsOps& LoopbackVerbs::ops() const noexcept {
  static const VerbsOps table = loopback::makeOps();
  return table;
}

LoopbackStats LoopbackVerbs::stats() const noexcept {
  const loopback::FabricCounters& c = fabric_->counters;
  LoopbackStats s;
  s.wrs_executed = c.wrs_executed.load();
  s.bytes_moved = c.bytes_moved.load();
  s.error_completions = c.error_completions.load();
  s.flushed = c.flushed.load();
  s.retry_exceeded = c.retry_exceeded.load();
  s.concurrent_posts = c.concurrent_posts.load();
  s.cq_overflows = c.cq_overflows.load();
  s.registrations = c.registrations.load();
  s.relaxed_registrations = c.relaxed_registrations.load();
  s.async_acks = c.async_acks.load();
  {
    std::lock_guard<std::mutex> lock(fabric_->reg_mu);
    s.reg_in_flight_max = fabric_->reg_in_flight_max;
  }
  s.open_contexts = c.contexts.load();
  s.pds = c.pds.load();
  s.mrs = c.mrs.load();
  s.cqs = c.cqs.load();
  s.qps = c.qps.load();
  return s;
}

void LoopbackVerbs::setRegistrationModel(const RegistrationModel& model) {
  std::lock_guard<std::mutex> lock(fabric_->reg_mu);
  fabric_->reg_model = model;
  fabric_->reg_in_flight_max = 0;
  fabric_->reg_met = false;
}

namespace loopback {

bool Fabric::enterRegistration(const Device& d, size_t length) {
  std::unique_lock<std::mutex> lock(reg_mu);
  ++reg_in_flight;
  reg_in_flight_max = std::max(reg_in_flight_max, reg_in_flight);
  if (reg_model.meet > 0) {
    if (reg_in_flight >= reg_model.meet) reg_met = true;
    reg_cv.notify_all();
    // A bound, not an expectation: sequential registrations never meet and the
    // test sees reg_in_flight_max below `meet`.
    reg_cv.wait_for(lock, std::chrono::seconds(60), [&] { return reg_met; });
  }
  const uint64_t cost_ns = reg_model.ns_per_page * ((length + 4095) / 4096);
  const bool fail = !reg_model.fail_on_device.empty() && reg_model.fail_on_device == d.spec.name;
  lock.unlock();
  if (cost_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(cost_ns));
  return !fail;
}

void Fabric::leaveRegistration() {
  std::lock_guard<std::mutex> lock(reg_mu);
  --reg_in_flight;
}

}  // namespace loopback

void LoopbackVerbs::setOnContractBreak(OnContractBreak policy) noexcept {
  fabric_->policy.store(policy, std::memory_order_relaxed);
}

std::vector<LoopbackTransition> LoopbackVerbs::transitions() const {
  std::lock_guard<std::mutex> lock(fabric_->transitions_mu);
  return fabric_->transitions;
}

void loopback::Fabric::recordTransition(const LoopbackTransition& t) {
  std::lock_guard<std::mutex> lock(transitions_mu);
  transitions.push_back(t);
}

const std::string& LoopbackVerbs::sysfsRoot() const noexcept {
  return fabric_->sysfs_root;
}

namespace {

LoopbackVerbs* g_engine_fabric = nullptr;

// Every engine is gone by exit: a verbs object still alive was leaked, and fails
// the program. The sysfs tree goes in any case.
void atEngineTestExit() {
  std::error_code ignored;
  std::filesystem::remove_all(g_engine_fabric->sysfsRoot(), ignored);
  if (reportLive(g_engine_fabric->stats(), "LEAK at exit")) std::_Exit(1);
}

}  // namespace

LoopbackVerbs& engineTestVerbs() {
  static LoopbackVerbs* fabric = [] {
    LoopbackOptions options;
    options.devices = {{"soft0", true, 0}, {"soft1", true, 0}};
    g_engine_fabric = new LoopbackVerbs(std::move(options));  // never destroyed, see the header
    std::atexit(atEngineTestExit);
    setVerbsOpsOverride(&g_engine_fabric->ops());
    return g_engine_fabric;
  }();
  return *fabric;
}

}  // namespace tent::fabric::testing
