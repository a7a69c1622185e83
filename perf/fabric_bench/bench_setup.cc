// fabric_bench set-up: provider, memory, QPs, and the target - in this process,
// or in a forked child that passes its identity, QP numbers, address and rkey
// back through a pipe (and learns ours the same way).
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fabric/select/select_provider.h"
#include "perf/fabric_bench/bench.h"
#include "topology/topology.h"

namespace tent::perf::fabric_bench {

namespace {

using fabric::QpRemote;

// What the target tells the initiator (fixed-size, sent through a pipe).
struct TargetHello {
  int32_t ok = 0;
  char error[256] = {};
  fabric::PortIdentity port;
  uint32_t qp_nums[kMaxQps] = {};
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
};

struct InitiatorHello {
  fabric::PortIdentity port;
  uint32_t qp_nums[kMaxQps] = {};
};

bool writeAll(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

Result<std::unique_ptr<fabric::Provider>> openProvider(const Options& options) {
  auto topology = topology::Topology::loadLive();
  topology::Topology none;  // soft devices come from the config; verbs ignores it
  auto provider =
      fabric::createProvider(fabricConfigFor(options), topology.ok() ? *topology : none);
  if (!provider.ok()) return provider.status().withContext("fabric_bench: create provider");
  if ((*provider)->deviceCount() == 0)
    return Status::NotFound("fabric_bench: provider has no device");
  return provider;
}

Result<std::unique_ptr<fabric::QueuePair>> makeQp(fabric::Device& device,
                                                  fabric::CompletionQueue& cq, uint32_t depth) {
  return device.createQp({&cq, depth, 1});
}

Result<std::unique_ptr<Target>> makeTarget(fabric::Provider& provider, fabric::Device& device,
                                           uint32_t qps, size_t length) {
  auto target = std::make_unique<Target>();
  TENT_ASSIGN_OR_RETURN(target->memory, provider.allocateMemory(length, device.info().numa_node));
  target->length = length;
  std::memset(target->memory, 0, length);
  uint32_t access =
      fabric::kAccessLocalWrite | fabric::kAccessRemoteWrite | fabric::kAccessRemoteRead;
  TENT_ASSIGN_OR_RETURN(target->mr, device.registerMemory(target->memory, length, access));
  TENT_ASSIGN_OR_RETURN(target->cq, device.createCq(qps));
  for (uint32_t q = 0; q < qps; ++q) {
    TENT_ASSIGN_OR_RETURN(auto qp, makeQp(device, *target->cq, 1));
    target->qps.push_back(std::move(qp));
  }
  return target;
}

void releaseTarget(fabric::Provider& provider, std::unique_ptr<Target>& target) {
  if (!target) return;
  target->qps.clear();
  target->cq.reset();
  target->mr.reset();
  if (target->memory) (void)provider.freeMemory(target->memory, target->length);
  target.reset();
}

// The initiator's own memory, CQ and QPs.
Status makeInitiator(Bench& b) {
  const Options& o = b.options;
  b.local_length = b.slot_bytes * o.qps * 2;
  TENT_ASSIGN_OR_RETURN(b.local,
                        b.provider->allocateMemory(b.local_length, b.device->info().numa_node));
  uint32_t access =
      fabric::kAccessLocalWrite | fabric::kAccessRemoteWrite | fabric::kAccessRemoteRead;
  TENT_ASSIGN_OR_RETURN(b.local_mr, b.device->registerMemory(b.local, b.local_length, access));
  TENT_ASSIGN_OR_RETURN(b.cq, b.device->createCq(o.qps * o.depth));
  for (uint32_t q = 0; q < o.qps; ++q) {
    TENT_ASSIGN_OR_RETURN(auto qp, makeQp(*b.device, *b.cq, o.depth));
    b.qps.push_back(std::move(qp));
  }
  return Status::OK();
}

Status connectInProcess(Bench& b) {
  TENT_ASSIGN_OR_RETURN(b.local_target, makeTarget(*b.provider, *b.device, b.options.qps,
                                                   b.slot_bytes * b.options.qps));
  fabric::PortIdentity port = b.device->portIdentity();
  for (uint32_t q = 0; q < b.options.qps; ++q) {
    TENT_RETURN_IF_ERROR(
        fabric::connectQp(*b.local_target->qps[q], QpRemote::toQp(b.qps[q]->qpNum(), port)));
    TENT_RETURN_IF_ERROR(
        fabric::connectQp(*b.qps[q], QpRemote::toQp(b.local_target->qps[q]->qpNum(), port)));
  }
  b.remote_addr = reinterpret_cast<uint64_t>(b.local_target->memory);
  b.remote_rkey = b.local_target->mr->rkey();
  return Status::OK();
}

// Two processes: the child was forked before any provider existed.
Status connectToChild(Bench& b, TargetHello& hello) {
  if (!readAll(b.from_child, &hello, sizeof(hello)))
    return Status::Unavailable("fabric_bench: target process died during set-up");
  if (!hello.ok) return Status::Unavailable(std::string("fabric_bench: target: ") + hello.error);
  TENT_RETURN_IF_ERROR(makeInitiator(b));
  InitiatorHello mine;
  mine.port = b.device->portIdentity();
  for (uint32_t q = 0; q < b.options.qps; ++q) mine.qp_nums[q] = b.qps[q]->qpNum();
  if (!writeAll(b.to_child, &mine, sizeof(mine)))
    return Status::Unavailable("fabric_bench: target process gone");
  for (uint32_t q = 0; q < b.options.qps; ++q) {
    TENT_RETURN_IF_ERROR(
        fabric::connectQp(*b.qps[q], QpRemote::toQp(hello.qp_nums[q], hello.port)));
  }
  char ready = 0;
  if (!readAll(b.from_child, &ready, 1) || ready != 'R')
    return Status::Unavailable("fabric_bench: target failed to connect");
  b.remote_addr = hello.addr;
  b.remote_rkey = hello.rkey;
  return Status::OK();
}

Status forkTarget(Bench& b) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return Status::IoError("fabric_bench: pipe failed");
  pid_t pid = fork();
  if (pid < 0) return Status::IoError("fabric_bench: fork failed");
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    runChildTarget(b.options, down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  b.child = pid;
  b.to_child = down[1];
  b.from_child = up[0];
  return Status::OK();
}

}  // namespace

void runChildTarget(const Options& options, int from_parent, int to_parent) {
  TargetHello hello;
  auto fail = [&](const Status& s) {
    std::snprintf(hello.error, sizeof(hello.error), "%s", s.toString().c_str());
    (void)writeAll(to_parent, &hello, sizeof(hello));
    _exit(1);
  };
  size_t slot = 0;
  for (uint64_t s : options.sizes) slot = s > slot ? s : slot;
  auto provider = openProvider(options);
  if (!provider.ok()) fail(provider.status());
  fabric::Device& device = (*provider)->device(0);
  auto target = makeTarget(**provider, device, options.qps, slot * options.qps);
  if (!target.ok()) fail(target.status());
  hello.ok = 1;
  hello.port = device.portIdentity();
  for (uint32_t q = 0; q < options.qps; ++q) hello.qp_nums[q] = (*target)->qps[q]->qpNum();
  hello.addr = reinterpret_cast<uint64_t>((*target)->memory);
  hello.length = (*target)->length;
  hello.rkey = (*target)->mr->rkey();
  InitiatorHello peer;
  if (!writeAll(to_parent, &hello, sizeof(hello)) || !readAll(from_parent, &peer, sizeof(peer)))
    _exit(1);
  for (uint32_t q = 0; q < options.qps; ++q) {
    Status s = fabric::connectQp(*(*target)->qps[q], QpRemote::toQp(peer.qp_nums[q], peer.port));
    if (!s.ok()) {
      std::fprintf(stderr, "fabric_bench target: %s\n", s.toString().c_str());
      _exit(1);
    }
  }
  (void)writeAll(to_parent, "R", 1);
  char quit = 0;
  (void)readAll(from_parent, &quit, 1);  // returns when the initiator is done (or died)
  releaseTarget(**provider, *target);
  provider->reset();
  _exit(0);
}

Result<std::unique_ptr<Bench>> setUp(const Options& options) {
  auto b = std::make_unique<Bench>();
  b->options = options;
  for (uint64_t s : options.sizes) b->slot_bytes = s > b->slot_bytes ? s : b->slot_bytes;
  if (options.processes == 2) TENT_RETURN_IF_ERROR(forkTarget(*b));  // before any provider exists
  TENT_ASSIGN_OR_RETURN(b->provider, openProvider(options));
  b->device = &b->provider->device(0);
  if (options.processes == 2) {
    TargetHello hello;
    TENT_RETURN_IF_ERROR(connectToChild(*b, hello));
  } else {
    TENT_RETURN_IF_ERROR(makeInitiator(*b));
    TENT_RETURN_IF_ERROR(connectInProcess(*b));
  }
  return b;
}

Bench::~Bench() {
  qps.clear();
  cq.reset();
  local_mr.reset();
  if (provider && local) (void)provider->freeMemory(local, local_length);
  if (provider) releaseTarget(*provider, local_target);
  if (to_child >= 0) close(to_child);  // the child's read returns: it cleans up and exits
  if (from_child >= 0) close(from_child);
  if (child > 0) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  provider.reset();
}

}  // namespace tent::perf::fabric_bench
