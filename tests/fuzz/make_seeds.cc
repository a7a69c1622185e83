// Writes the committed seed corpora and dictionaries of the fuzz targets:
//   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
// Binary seeds come from encoding valid messages, so they follow the formats as
// they are; the text seeds are a few hand-made shapes. The config target also reads
// config/examples/ as seeds (run_fuzzer.sh is given both directories).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "fabric/tcp/tcp_wire.h"
#include "wire/bootstrap.h"
#include "wire/control_frames.h"
#include "wire/segment_descriptor.h"
#include "perf/tebench/workload_classes.h"
#include "wire/bootstrap.h"
#include "wire/control_frames.h"
#include "wire/segment_descriptor.h"

namespace {

namespace fs = std::filesystem;
using namespace tent;

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  write(path, std::string(bytes.begin(), bytes.end()));
}

metadata::BootstrapMessage bootstrap(size_t qps) {
  metadata::BootstrapMessage m;
  m.initiator_segment = "10.0.0.1:7000";
  m.initiator_instance = 0x1234567890abcdefULL;
  m.local_device = "mlx5_0";
  m.peer_device = "mlx5_1";
  m.port.gid[10] = 0xff;
  m.port.gid[11] = 0xff;
  m.port.lid = 7;
  m.generation = 3;
  for (size_t i = 0; i < qps; ++i) m.data_qp_nums.push_back(static_cast<uint32_t>(100 + i));
  m.direct_qp_num = 99;
  return m;
}

void bootstrapSeeds(const fs::path& dir) {
  write(dir / "v2-two-qps",
        metadata::encodeBootstrap(bootstrap(2), metadata::kBootstrapVersionV2));
  metadata::BootstrapMessage tagged = bootstrap(2);
  tagged.setExtension(metadata::BootstrapTag::kLink, {1, 2, 0, 4});
  tagged.setExtension(metadata::BootstrapTag::kPsn, {1, 0, 0, 0, 2, 0, 0, 0});
  tagged.extensions.push_back({999, {7}});  // a newer peer's tag
  write(dir / "v3-extensions", metadata::encodeBootstrap(tagged));
  write(dir / "v1-two-qps", metadata::encodeBootstrap(bootstrap(2), metadata::kBootstrapVersionV1));
  write(dir / "v3-max-qps", metadata::encodeBootstrap(bootstrap(metadata::kMaxBootstrapQps)));
  metadata::BootstrapMessage names = bootstrap(1);
  names.initiator_segment = std::string(metadata::kMaxNameBytes, 'h');
  names.local_device.clear();
  write(dir / "v3-longest-name", metadata::encodeBootstrap(names));
  std::vector<uint8_t> truncated = metadata::encodeBootstrap(bootstrap(2));
  truncated.pop_back();  // the body length no longer matches
  write(dir / "edge-truncated", truncated);
}

metadata::SegmentDescriptor descriptor() {
  metadata::SegmentDescriptor d;
  d.name = "10.0.0.2:7000";
  d.instance = 42;
  d.version = 5;
  d.devices = {{"mlx5_0", {}, 0}, {"mlx5_1", {}, 1}};
  metadata::BufferDescriptor one{0x10000, 0x4000, {}, {11, 12}};
  one.regions = {{0x10000, 0x1000, "cpu:0", {0}}, {0x11000, 0x3000, "cuda:1", {1, 0}}};
  metadata::BufferDescriptor two{0x20000, 0x1000, {{0x20000, 0x1000, "*", {}}}, {21, 22}};
  d.buffers = {one, two};
  d.max_bootstrap_version = 3;
  d.buffers[0].name = "kv";
  d.buffers[0].access = 3;
  d.buffers[0].seq = 1;
  d.buffers[1].access = 1;
  d.buffers[1].seq = 2;
  return d;
}

void descriptorSeeds(const fs::path& dir) {
  write(dir / "two-devices-two-buffers", metadata::encodeDescriptor(descriptor()));
  write(dir / "v2-two-devices-two-buffers",
        metadata::encodeDescriptor(descriptor(), metadata::kDescriptorVersionV2));
  metadata::SegmentDescriptor empty;
  empty.name = "h:1";
  write(dir / "empty", metadata::encodeDescriptor(empty));
  metadata::SegmentDescriptor overlap = descriptor();
  overlap.buffers[1].addr = overlap.buffers[0].addr + 1;  // rejected: buffers overlap
  overlap.buffers[1].regions[0].addr = overlap.buffers[1].addr;
  write(dir / "edge-overlapping-buffers", metadata::encodeDescriptor(overlap));
}

void configSeeds(const fs::path& dir) {
  write(dir / "defaults.yaml", config::toYaml(*config::defaults()));
  write(dir / "flow.yaml",
        "eal: {mode: manual, extra_args: [--vdev=net_null0]}\n"
        "fabric: {provider: soft, soft: {devices: [{name: soft0, link_gbps: 12.5}]}}\n"
        "lcores: [{cpu: -1, pollers: [rail:soft0, background], idle: {spin_polls: 0x10}}]\n");
  write(dir / "anchors.yaml",
        "workers: &w {burst: 16}\ndirect: {mode: force, max_bytes: 0}\n"
        "log: {level: info, components: {engine: debug}}\nbootstrap:\n  listen: '[::1]:0'\n");
  write(dir / "quoted.yaml", "topology:\n  xml_file: \"/tmp/t\\x41.xml\"\n# comment\n");
  // What fuzzing found, kept as seeds so every run checks them again.
  write(dir / "found-stray-comma.yaml", ",");
  write(dir / "found-not-utf8.yaml", "eal: {extra_args: [\"--vdev=net_null\xe5\x30\"]}\n");
  write(dir / "edge-eal-help.yaml", "eal:\n  extra_args: [--log-level, help, -vh]\n");
  write(dir / "edge-deep.yaml", "eal: " + std::string(300, '[') + std::string(300, ']') + "\n");
}

void workloadSeeds(const fs::path& dir) {
  write(dir / "two-classes.json",
        R"([{"name":"fg","threads":2,"block_size":4096,"batch_size":1,)"
        R"("intent_type":"foreground_get","deadline_us":250,"slo_us":300,"weight":4},)"
        R"({"name":"bg","threads":6,"block_size":4194304,"poll_mode":"yield"}])");
  write(dir / "intent-number.json",
        R"([{"name":"a","threads":1,"block_size":8,"intent_type":3,"weight":0.5}])");
  write(dir / "nested.json", R"([{"name":"n","threads":1,"block_size":8,"x":[[{"y":[]}]]}])");
  write(dir / "found-huge-number.json",
        R"([{"name":"n","threads":1,"block_size":8,"weight":1e400}])");
  write(dir / "edge-deep.json", std::string(2000, '[') + std::string(2000, ']'));
}

// Words the mutator splices in: the schema's key names and its enum values.
void configDict(const fs::path& path) {
  std::set<std::string> words = {"auto",       "soft",   "verbs", "eal",   "manual", "force", "off",
                                 "background", "rail:*", "true",  "false", "[]",     "{}",    "- "};
  for (const config::KeyInfo& key : config::keyList()) {
    // "fabric.soft.devices[].name" gives fabric, soft, devices and name.
    std::string path = key.path;
    for (size_t at; (at = path.find("[]")) != std::string::npos;) path.erase(at, 2);
    for (size_t start = 0, dot = 0; dot != std::string::npos; start = dot + 1) {
      dot = path.find('.', start);
      words.insert(path.substr(start, dot == std::string::npos ? dot : dot - start));
    }
  }
  std::string text;
  for (const std::string& w : words) text += "\"" + w + "\"\n";
  write(path, text);
}

void workloadDict(const fs::path& path) {
  std::string text;
  for (const std::string& key : bench::workloadClassKeys()) text += "\"\\\"" + key + "\\\"\"\n";
  for (const char* v : {"foreground_get", "background_prefetch", "migration", "checkpoint",
                        "weight_loading", "unspec", "spin", "yield"}) {
    text += "\"\\\"" + std::string(v) + "\\\"\"\n";
  }
  write(path, text);
}

// First byte: which parser (fuzz_control_frames) or server (fuzz_control_session).
std::vector<uint8_t> tagged(uint8_t tag, std::vector<uint8_t> body) {
  body.insert(body.begin(), tag);
  return body;
}

std::vector<uint8_t> frame(metadata::FrameType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f(metadata::kFrameHeaderBytes);
  metadata::encodeFrameHeader(type, static_cast<uint32_t>(payload.size()), f.data());
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

void controlFrameSeeds(const fs::path& dir) {
  write(dir / "header", tagged(0, frame(metadata::FrameType::kBootstrap, {})));
  write(dir / "hello", tagged(1, metadata::encodeHello(metadata::Hello{})));
  metadata::Challenge c;
  c.auth_required = true;
  write(dir / "challenge", tagged(2, metadata::encodeChallenge(c)));
  write(dir / "auth", tagged(3, metadata::encodeAuth(metadata::AuthMessage{true, {}})));
  write(dir / "release", tagged(4, metadata::encodeRelease({"mlx5_0", "mlx5_1", 3})));
  write(dir / "descriptor-request", tagged(5, metadata::encodeDescriptorRequest(2)));
  const std::string e = "PermissionDenied: authentication failed";
  write(dir / "error", tagged(6, std::vector<uint8_t>(e.begin(), e.end())));
}

void controlSessionSeeds(const fs::path& dir) {
  auto join = [](std::vector<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const auto hello = frame(metadata::FrameType::kHello, metadata::encodeHello(metadata::Hello{}));
  const auto auth = frame(metadata::FrameType::kAuth, metadata::encodeAuth({}));
  const auto get = frame(metadata::FrameType::kGetDescriptor, metadata::encodeDescriptorRequest(2));
  const auto boot = frame(metadata::FrameType::kBootstrap, metadata::encodeBootstrap(bootstrap(2)));
  write(dir / "session-open", tagged(0, join({hello, auth, get, boot})));
  write(dir / "session-secret", tagged(1, join({hello, auth, get})));
  write(dir / "one-shot-descriptor", tagged(0, frame(metadata::FrameType::kGetDescriptor, {})));
  write(dir / "one-shot-bootstrap", tagged(0, boot));
  write(
      dir / "keepalive-release",
      tagged(0,
             join({hello, auth, frame(metadata::FrameType::kKeepalive, {}),
                   frame(metadata::FrameType::kRelease, metadata::encodeRelease({"a", "b", 1}))})));
}

}  // namespace

// tcp provider connections: each seed is a hello followed by a few messages.
void tcpWireSeeds(const fs::path& dir) {
  using namespace fabric::tcp;
  using fabric::WcStatus;
  auto hello = [](HelloKind kind) {
    Hello h;
    h.kind = kind;
    h.src_qp = 0x4001;
    h.dst_qp = 0x8002;
    h.src.gid[10] = h.src.gid[11] = 0xff;
    h.src.gid[12] = 10;
    h.src.gid[15] = 1;
    h.src.lid = 7000;
    h.dst = h.src;
    h.dst.gid[15] = 2;
    h.max_send_wr = 128;
    if (kind == HelloKind::kReject) h.reason = RejectReason::kNoSuchQp;
    std::string out(kHelloBytes, '\0');
    encodeHello(h, reinterpret_cast<uint8_t*>(out.data()));
    return out;
  };
  auto header = [](Opcode op, uint32_t length, uint64_t seq, WcStatus status) {
    Header h;
    h.opcode = op;
    h.length = length;
    h.seq = seq;
    h.status = status;
    if (isRequest(op)) {
      h.remote_addr = 0x7f0000001000ull;
      h.rkey = 0x00010002;
    }
    std::string out(kHeaderBytes, '\0');
    encodeHeader(h, reinterpret_cast<uint8_t*>(out.data()));
    return out + std::string(payloadBytes(h), 'p');
  };
  write(dir / "hello-requests", hello(HelloKind::kHello) +
                                    header(Opcode::kWriteReq, 8, 0, WcStatus::kSuccess) +
                                    header(Opcode::kReadReq, 4096, 1, WcStatus::kSuccess));
  write(dir / "ack-responses", hello(HelloKind::kAck) +
                                   header(Opcode::kWriteAck, 0, 0, WcStatus::kSuccess) +
                                   header(Opcode::kReadResp, 16, 1, WcStatus::kSuccess) +
                                   header(Opcode::kWriteAck, 0, 2, WcStatus::kRemoteAccess));
  write(dir / "reject", hello(HelloKind::kReject));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  bootstrapSeeds(root / "bootstrap");
  descriptorSeeds(root / "descriptor");
  configSeeds(root / "config");
  workloadSeeds(root / "workload_classes");
  controlFrameSeeds(root / "control_frames");
  controlSessionSeeds(root / "control_session");
  tcpWireSeeds(root / "tcp_wire");
  configDict(root / "config.dict");
  workloadDict(root / "workload_classes.dict");
  return 0;
}
