// tent configuration: parsed once from YAML into these immutable, validated structs.
// Every key, its default and its range is documented in docs/config.md.
// Nothing outside config/ reads the environment.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"

namespace tent::config {

// ---- lcores ---------------------------------------------------------------

// Idle policy of one lcore: after `spin_polls` idle passes it calls rte_pause()
// for `pause_polls` passes, then sleeps on its doorbell (docs/lcore.md): naps
// doubling from sleep_min_us to sleep_max_us while a poller still expects work
// nobody announces (posted WRs), else until woken, at most block_max_us (0: never
// longer than a nap). Any busy pass resets it to spinning.
struct IdlePolicy {
  uint32_t spin_polls = 256;
  uint32_t pause_polls = 2048;
  uint32_t sleep_min_us = 1;
  uint32_t sleep_max_us = 100;
  uint32_t block_max_us = 100000;

  bool operator==(const IdlePolicy&) const = default;
};

enum class PollerKind : uint8_t {
  kRail,        // per context: polls its direct CQ, serves the foreground fallback queue
  kBackground,  // bulk slices: burst dequeue, batched posts, data CQ polling
};

struct PollerSpec {
  PollerKind kind = PollerKind::kBackground;
  std::string device;  // kRail: a device name or "*" (every context); empty for kBackground

  bool operator==(const PollerSpec&) const = default;
};

struct LcoreSpec {
  int cpu = -1;  // CPU to pin to; -1 = not pinned (runs on any CPU)
  std::vector<PollerSpec> pollers;
  IdlePolicy idle;

  bool operator==(const LcoreSpec&) const = default;
};

// `lcores: auto`: the layout derived from the topology and the CPUs the process may
// use (topology/lcore_auto.h). How rail pollers get lcores:
enum class AutoRails : uint8_t {
  kAuto,       // the first of dedicated, numa, shared that fits the CPUs
  kDedicated,  // one rail lcore per device, on a CPU of the device's NUMA node
  kNuma,       // one rail lcore per NUMA node with devices, running that node's rail pollers
  kShared,     // no rail lcore: rail pollers run on the background lcores of their node
};

struct LcoreAutoConfig {
  AutoRails rails = AutoRails::kAuto;
  uint32_t background_lcores = 1;  // exactly this many, spread over the devices' NUMA nodes
  uint32_t reserve_cpus = 1;       // allowed CPUs left without an lcore, for the application
  IdlePolicy idle;                 // of every lcore of the layout

  bool operator==(const LcoreAutoConfig&) const = default;
};

enum class LcoreMode : uint8_t {
  kEal,     // DPDK EAL launches the lcores (production)
  kManual,  // no threads: a test steps the pollers itself (deterministic)
};

struct EalConfig {
  LcoreMode mode = LcoreMode::kEal;
  uint32_t memory_mb = 64;
  bool no_huge = true;
  bool no_pci = true;
  bool no_shconf = true;
  std::string file_prefix;              // empty: "tent-<pid>" (unique per process)
  std::vector<std::string> extra_args;  // appended verbatim to the EAL argument list

  bool operator==(const EalConfig&) const = default;
};

// ---- fabric ---------------------------------------------------------------

enum class FabricProvider : uint8_t { kAuto, kVerbs, kSoft, kTcp };

struct SoftDevice {
  std::string name;
  int numa_node = 0;
  std::string pci;          // optional PCI address, for rail-map placement
  double link_gbps = 0;     // 0 = unlimited
  uint64_t latency_ns = 0;  // added to every completion

  bool operator==(const SoftDevice&) const = default;
};

struct SoftFabricConfig {
  // Empty: one soft device per RDMA device of the topology (named and placed
  // like it), or a single "soft0" on NUMA node 0 when the topology has none.
  std::vector<SoftDevice> devices;
  double default_link_gbps = 0;     // for devices taken from the topology
  uint64_t default_latency_ns = 0;  // for devices taken from the topology
  // How long the emulated RC requester retransmits to a responder that does not answer
  // (dead, closed, QP not RTR/RTS) before the WR completes with retry-exceeded. On verbs
  // the same budget is (retry_cnt + 1) x 4.096 us x 2^timeout: 537 ms with its defaults.
  uint32_t retry_budget_ms = 537;
  uint32_t max_mrs = 4096;  // memory regions per device
  // Longest message one WR may carry on every soft device (as ibv_port_attr.max_msg_sz);
  // longer WRs complete with a local length error. Small values test the engine's splitting.
  uint64_t max_message_bytes = uint64_t{1} << 31;
  std::string shm_dir = "/dev/shm";
  // Benchmarks only: false skips the payload copy (every check, completion and timing
  // stays), to measure the engine's own per-slice cost as on a NIC that does the DMA.
  // The link model says so in every figure; transferred bytes are not delivered.
  bool copy_payload = true;
  // Payload copies of at least this many bytes use non-temporal stores, as a NIC's DMA
  // does not fill the CPU's caches; smaller ones stay cached (DDIO). 0 = never.
  uint64_t stream_copy_min_bytes = 65536;

  bool operator==(const SoftFabricConfig&) const = default;
};

struct VerbsFabricConfig {
  // Allow-list; empty: every device whose port is ACTIVE with a usable GID, minus
  // exclude_devices. A named device that cannot be used is an error; an unnamed one
  // is skipped with a warning.
  std::vector<std::string> devices;
  std::vector<std::string> exclude_devices;  // deny-list (storage, management ports)
  uint8_t port = 1;
  int gid_index = -1;  // -1: pick a RoCE v2 / IB GID automatically
  // RoCE auto GID: only GIDs on this netdev; empty: any up netdev, the default
  // route's interface first.
  std::string gid_interface;
  uint32_t mtu = 4096;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint32_t max_rd_atomic = 16;
  // Memory regions ask for PCIe relaxed ordering (IBV_ACCESS_RELAXED_ORDERING; a
  // device without it ignores the flag).
  bool relaxed_ordering = true;
  // CQ moderation: of a posted chain's WRs, the NIC signals every Nth and the last;
  // the others' completions are inferred in order (1 = every WR signaled).
  uint32_t signal_every = 8;

  bool operator==(const VerbsFabricConfig&) const = default;
};

// One tcp device: a listening socket that peers' queue pairs connect to.
struct TcpDevice {
  std::string name;
  // Numeric address and port to listen on ("10.0.0.5:0", "[fd00::5]:7000"); port 0:
  // the kernel picks one. A wildcard (0.0.0.0, [::]) needs `advertise`.
  std::string listen = "127.0.0.1:0";
  std::string advertise;  // numeric address peers connect to; empty: the listen address
  int numa_node = 0;

  bool operator==(const TcpDevice&) const = default;
};

struct TcpFabricConfig {
  // Empty: one device "tcp0" listening on 127.0.0.1:0 (this host only, like bootstrap.listen).
  std::vector<TcpDevice> devices;
  // How long a peer may stay silent while WRs to it are outstanding (or while its queue
  // pair's connection is being set up) before they complete with retry-exceeded; also
  // the socket's TCP_USER_TIMEOUT and the keepalive budget.
  uint32_t retry_budget_ms = 4000;
  uint32_t max_mrs = 4096;  // memory regions per device
  // Longest message one WR may carry (as ibv_port_attr.max_msg_sz).
  uint64_t max_message_bytes = uint64_t{1} << 31;
  // GPU memory moves through pinned host buffers, per device, allocated at its first
  // registration of GPU memory: this many for the send streams (plus one for receiving)
  // of this many bytes each.
  uint32_t gpu_staging_buffers = 8;
  uint64_t gpu_staging_buffer_bytes = uint64_t{1} << 20;
  // A poll that finds a tcp CQ empty reads its QPs' sockets itself (caller-side
  // progress, docs/fabric.md). Off by default: on a loaded host it lengthened the direct
  // lane's tail in the measurements so far (docs/perf/tcp.md).
  bool caller_progress = false;

  bool operator==(const TcpFabricConfig&) const = default;
};

struct FabricConfig {
  // auto: verbs when a device exists (and opens), else tcp; soft only when configured
  FabricProvider provider = FabricProvider::kAuto;
  SoftFabricConfig soft;
  VerbsFabricConfig verbs;
  TcpFabricConfig tcp;

  bool operator==(const FabricConfig&) const = default;
};

// ---- topology -------------------------------------------------------------

struct TopologyConfig {
  std::string xml_file;  // empty: discover the live machine with hwloc

  bool operator==(const TopologyConfig&) const = default;
};

// ---- transfer engine --------------------------------------------------------

// Latency-sensitive requests (deadline_ns != 0 or FOREGROUND_GET) that take the worker
// path - the direct path off, declined, or a direct piece falling back - are served by
// their context's rail poller (its own ring and rail QP, never behind bulk: the RFC's
// "tune worker priority scheduling" alternative) when the priority lane is on, and
// queue with bulk on the background pollers when it is off (the pre-RFC engine).
enum class PriorityLane : uint8_t {
  kAuto,  // on, unless direct.mode is off: `direct.mode: off` alone is the pre-RFC engine
  kOn,
  kOff,
};

struct WorkerConfig {
  uint64_t block_size = 65536;    // slice size
  uint32_t ring_size = 8192;      // per poller work ring (power of two)
  uint32_t burst = 32;            // slices dequeued (and at most posted) per pass
  uint32_t qps_per_endpoint = 2;  // data QPs per endpoint
  uint32_t qp_depth = 128;        // max_send_wr of a data QP
  // Entries of a poller's data CQ on a context; 0 = derived from what may attach to it
  // (cqSizing()). An explicit value must hold that much: checked at load.
  uint32_t cq_depth = 0;
  uint32_t slice_pool = 65536;  // preallocated slices per engine
  uint32_t max_batch_capacity = 65536;
  uint32_t max_slice_retries = 3;       // a failed slice retries on another device pair
  uint32_t device_error_threshold = 8;  // consecutive errors that pause a device
  uint32_t device_pause_ms = 1000;
  uint32_t slice_timeout_ms = 30000;  // software timeout of a posted worker slice
  PriorityLane priority_lane = PriorityLane::kAuto;
  // (workers.post_batch was removed, issue 13: what one pass posts is bounded by
  // burst and by the QPs' free depth; the loader refuses the key.)

  bool operator==(const WorkerConfig&) const = default;
};

enum class DirectMode : uint8_t {
  kAuto,   // the RFC's rule: deadline_ns != 0 or intent FOREGROUND_GET
  kOff,    // never; every request takes the worker path
  kForce,  // every eligible request tries the direct path first
};

// How the QPs of one class mark their packets (fabric::QpTraffic): a RoCE GRH traffic
// class (DSCP << 2; the ECN bits are the NIC's) and an IB service level. The initiator's
// values hold on both ends of a connection (the responder's READ responses and ACKs
// carry them too); they travel in the bootstrap.
struct QosClass {
  uint8_t traffic_class = 0;  // [0, 252], a multiple of 4
  uint8_t service_level = 0;  // [0, 15]
  bool operator==(const QosClass&) const = default;
};

struct QosConfig {
  QosClass direct;   // the direct lane's QP of every endpoint
  QosClass data;     // worker data QPs and the rail QP
  QosClass control;  // control/notify QPs (SENDs)
  bool operator==(const QosConfig&) const = default;
};

struct DirectConfig {
  DirectMode mode = DirectMode::kAuto;
  uint64_t max_bytes = 4 << 20;  // requests longer than this are not eligible (0 = no cap)
  uint32_t qp_depth = 1;         // send WRs of a direct QP (the RFC's depth is 1)
  uint32_t cq_depth = 0;         // entries of a context's direct CQ; 0 = derived
  uint32_t timeout_ms = 2000;    // software timeout of a posted direct slice
  // Added for the engine (issue 6):
  // false: endpoints get no direct QP and advertise direct_qp_num = 0, as a peer
  // without direct support does (the compatibility tests use it).
  bool create_qp = true;
  // false: only callers of getTransferStatus() poll the direct CQs (the RFC's
  // original scheme); true: each context's rail poller polls its direct CQ too.
  bool poll_by_rail = true;
  // With poll_by_rail: the rail poller leaves a lane to its caller for this long after
  // the post before it polls the direct CQ for it too (0 = at once). A spinning caller
  // reaps its own completion; a rail lcore that raced it for every completion took
  // the CQ's lock and lines from under it and kept itself awake doing so.
  uint32_t rail_grace_us = 50;

  bool operator==(const DirectConfig&) const = default;
};

// Notifications (issue 23, docs/engine.md "Notifications"): a notify QP per endpoint,
// receive buffers under sender credits, a bounded inbox on the receiving side.
struct NotifyConfig {
  bool enabled = true;                // false: no notify QP, bootstraps advertise none
  uint32_t max_message_bytes = 4096;  // longest message (one receive buffer each)
  uint32_t credits = 16;              // receive buffers per notify QP (the sender's credits)
  uint32_t inbox_count = 4096;        // messages received and not yet taken
  uint64_t inbox_bytes = 16 << 20;    // their bytes
  uint32_t timeout_ms = 5000;         // a send's wait for a ready endpoint and its completion

  bool operator==(const NotifyConfig&) const = default;
};

// Endpoints (RC connections to peer devices): how many a node keeps and how it
// reconnects (docs/engine.md, "Endpoint lifecycle").
struct EndpointConfig {
  // Active endpoints per local device; beyond it idle ones are evicted (SIEVE). Spread
  // evenly over the background pollers.
  uint32_t max_per_context = 256;
  // Endpoints peers may open towards each local device (their target side).
  uint32_t max_passive_per_context = 1024;
  // A peer whose connect or bootstrap failed is retried after a delay doubling from
  // the initial to the maximum, with jitter; meanwhile requests to it fail at once.
  uint32_t reconnect_initial_ms = 50;
  uint32_t reconnect_max_ms = 2000;

  bool operator==(const EndpointConfig&) const = default;
};

struct AuthConfig {
  // A file holding the cluster secret (>= 32 bytes, e.g. 64 hex characters, mode 600).
  // Empty: no authentication (anyone who reaches the control port is served).
  std::string secret_file;

  bool operator==(const AuthConfig&) const = default;
};

struct BootstrapConfig {
  std::string listen = "127.0.0.1:0";  // control listener; port 0 = any free port
  uint32_t connect_timeout_ms = 3000;
  uint32_t descriptor_refresh_ms = 200;  // min gap between refetches of a peer descriptor
  // Added for the engine (issue 5):
  // Host part of this node's segment name; empty: the listen host (which must
  // then not be a wildcard such as 0.0.0.0 for peers to reach it).
  std::string advertise_host;
  // Budget for one request/response on an established control connection, so a
  // peer that accepts but never answers cannot hold the control thread.
  uint32_t io_timeout_ms = 3000;
  // Added for the control plane (issue 10):
  uint32_t max_connections = 1024;       // open control connections served; more are refused
  uint32_t handshake_timeout_ms = 2000;  // a new connection authenticates within this
  uint32_t keepalive_ms = 1000;          // an idle session is probed this often
  // A peer whose control session answers nothing for this long is declared down
  // (its endpoints are retired). Until then a session slower than io_timeout_ms only
  // delays control requests: ready endpoints keep carrying transfers, as long as
  // the data path completes them.
  uint32_t peer_timeout_ms = 30000;
  uint32_t max_segments = 4096;  // peer segments open at once
  // Of max_connections, from one peer address. Both caps first close idle sessions
  // (and connections still in their handshake) to make room (docs/engine.md, "Caps").
  uint32_t max_connections_per_source = 256;
  AuthConfig auth;

  bool operator==(const BootstrapConfig&) const = default;
};

// ---- metadata: where peers find each other (docs/config.md, "metadata") -------

enum class MetadataBackend : uint8_t {
  kP2p,   // a segment name is the peer's host:port; its descriptor comes from its control port
  kEtcd,  // segments are registered in etcd (v3) under a prefix, with a lease
};

// TLS towards etcd (https); empty files: plain http.
struct EtcdTlsConfig {
  std::string ca_file;    // CA bundle that signed etcd's certificate; set: https
  std::string cert_file;  // client certificate (etcd --client-cert-auth), with key_file
  std::string key_file;

  bool operator==(const EtcdTlsConfig&) const = default;
};

struct EtcdConfig {
  std::vector<std::string> endpoints;  // host:port of etcd members (client URLs)
  std::string prefix = "/tent/";       // keys: <prefix>segments/<name>
  uint32_t lease_ttl_s = 10;           // an engine that stops refreshing disappears after this
  uint32_t request_timeout_ms = 2000;  // one request to one member
  uint32_t retry_initial_ms = 100;     // store away: retries back off from this ...
  uint32_t retry_max_ms = 5000;        // ... to this
  std::string user;                    // etcd authentication (empty: none)
  std::string password_file;           // the user's password, in a file (mode 600)
  EtcdTlsConfig tls;

  bool operator==(const EtcdConfig&) const = default;
};

struct MetadataConfig {
  MetadataBackend backend = MetadataBackend::kP2p;
  // The name this engine registers under with etcd; empty: "host:port" as with p2p.
  std::string name;
  EtcdConfig etcd;

  bool operator==(const MetadataConfig&) const = default;
};

struct TimeoutConfig {
  uint32_t endpoint_destroy_ms = 1000;  // drain budget when an endpoint is destroyed
  // How long unregistering with cancellation waits for the canceled transfers to drain.
  uint32_t unregister_drain_ms = 5000;

  bool operator==(const TimeoutConfig&) const = default;
};

// ---- observability ----------------------------------------------------------

// The Prometheus endpoint (docs/metrics.md): GET /metrics on `listen`.
struct MetricsConfig {
  std::string listen;  // host:port (IPv6 as [addr]:port; port 0 = any free port); empty = off

  bool operator==(const MetricsConfig&) const = default;
};

struct LogConfig {
  std::string level = "warn";                     // every component
  std::map<std::string, std::string> components;  // per component overrides

  bool operator==(const LogConfig&) const = default;
};

struct Config {
  EalConfig eal;
  std::vector<LcoreSpec> lcores;  // default: one unpinned lcore running rail:* and background
  bool lcores_auto = false;       // `lcores: auto`: `lcores` is empty, lcore_auto says how
  LcoreAutoConfig lcore_auto;
  FabricConfig fabric;
  TopologyConfig topology;
  EndpointConfig endpoints;
  WorkerConfig workers;
  DirectConfig direct;
  NotifyConfig notify;
  QosConfig qos;
  BootstrapConfig bootstrap;
  MetadataConfig metadata;
  TimeoutConfig timeouts;
  MetricsConfig metrics;
  LogConfig log;
  std::string source = "<defaults>";  // where it came from, for messages

  bool operator==(const Config&) const = default;
};

// Parses a YAML file. Errors name the file, line, key and what is allowed:
//   "tent.yaml:12: workers.block_size: expected an integer in [4096, 1073741824], got 'big'"
Result<std::shared_ptr<const Config>> loadFile(const std::string& path);
// Parses YAML text; `source_name` stands in for a file name in messages.
Result<std::shared_ptr<const Config>> loadString(std::string_view yaml,
                                                 std::string_view source_name = "<string>");
// The defaults (every key at its default value).
std::shared_ptr<const Config> defaults();
// TENT_CONFIG names a YAML file when set; otherwise the defaults. The only environment read.
Result<std::shared_ptr<const Config>> loadFromEnvironment();

// Applies the log levels of a config to the logging facility.
Status applyLogConfig(const LogConfig& log);

// CQ depths the engine uses, derived from what can attach to each CQ: a CQ is never
// smaller than the send queues of every QP that may be on it (a verbs NIC refuses a QP
// that could overflow its CQ; the soft provider does too).
struct CqSizing {
  uint32_t background_pollers = 1;
  uint32_t endpoints_per_poller = 0;  // ceil(max_per_context / background_pollers)
  uint32_t background_cq = 0;         // endpoints_per_poller x qps_per_endpoint x qp_depth
  uint32_t rail_cq = 0;               // max_per_context x qp_depth (one rail QP per endpoint)
  uint32_t direct_cq = 0;             // max_per_context x direct.qp_depth
  uint32_t passive_cq = 0;  // max_passive_per_context x (qps_per_endpoint + 2), depth 1 each
};
inline constexpr uint32_t kMaxCqDepth = 1u << 22;
// The depths in use: an explicit workers.cq_depth / direct.cq_depth, else the derived.
CqSizing cqSizing(const Config& config);
// The derived depths alone (what explicit values are checked against).
CqSizing requiredCqSizing(const Config& config);

std::string_view toString(PollerKind k) noexcept;
std::string_view toString(FabricProvider p) noexcept;
std::string_view toString(DirectMode m) noexcept;
std::string_view toString(MetadataBackend b) noexcept;
std::string_view toString(PriorityLane p) noexcept;
// workers.priority_lane resolved (auto: on unless direct.mode is off).
bool priorityLaneOn(const Config& config) noexcept;
std::string_view toString(LcoreMode m) noexcept;
std::string_view toString(AutoRails r) noexcept;
// "background", "rail:*", "rail:mlx5_0".
std::string toString(const PollerSpec& p);
// Parses a poller spec as written in YAML ("background", "rail:*", "rail:<device>").
Result<PollerSpec> parsePollerSpec(std::string_view text);

// The whole config as YAML that loadString() reads back to an equal Config
// (every key written, defaults included).
std::string toYaml(const Config& config);
// Runs the parser's checks on a config built in code (ranges, enums, cross-field
// rules), so it is held to the same rules as a file. Messages name the key path;
// their line numbers refer to toYaml(config).
Status validate(const Config& config);

// One key the parser accepts: its full path ("workers.block_size"; keys of list
// items as "lcores[].cpu"), what it allows, and its default as YAML text
// (65536, "/dev/shm" with its quotes, auto). docs/config.md documents every entry
// with this default (a test checks it).
struct KeyInfo {
  std::string path;
  std::string allowed;
  std::string default_value;
};
const std::vector<KeyInfo>& keyList();

}  // namespace tent::config
