// Topology discovery with hwloc: the live machine or an hwloc XML file.
// Control path only; everything here runs once at engine start-up or in tools.
#include "topology/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>

#include "config/config.h"
#include "base/bounded_file.h"
#include "tent/log.h"

namespace tent::topology {
namespace {

constexpr uint16_t kVendorNvidia = 0x10de;
constexpr uint16_t kVendorAmd = 0x1002;

// Owns an hwloc topology handle for the duration of one load.
class HwlocHandle {
 public:
  HwlocHandle() { ok_ = hwloc_topology_init(&topo_) == 0; }
  ~HwlocHandle() {
    if (ok_) hwloc_topology_destroy(topo_);
  }
  HwlocHandle(const HwlocHandle&) = delete;
  HwlocHandle& operator=(const HwlocHandle&) = delete;

  bool ok() const { return ok_; }
  hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_{};
  bool ok_ = false;
};

std::vector<int> bitmapToVector(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

// The NUMA node an object belongs to: the one node of its nearest non-I/O ancestor,
// -1 when that ancestor spans several nodes (I/O attached to the whole machine).
int numaOfObject(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t anchor = obj->type == HWLOC_OBJ_PCI_DEVICE || obj->type == HWLOC_OBJ_OS_DEVICE ||
                               obj->type == HWLOC_OBJ_BRIDGE
                           ? hwloc_get_non_io_ancestor_obj(topo, obj)
                           : obj;
  if (anchor == nullptr || anchor->nodeset == nullptr) return -1;
  if (hwloc_bitmap_weight(anchor->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anchor->nodeset);
}

std::string formatBusId(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return text;
}

std::string pciBusId(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return formatBusId(a.domain, a.bus, a.dev, a.func);
}

// Host bridges have no bus id of their own: name them by the root bus below them.
std::string bridgeId(hwloc_obj_t bridge) {
  const auto& b = bridge->attr->bridge;
  if (b.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
    const auto& u = b.upstream.pci;
    return formatBusId(u.domain, u.bus, u.dev, u.func);
  }
  char text[32];
  std::snprintf(text, sizeof(text), "pci%04x:%02x", b.downstream.pci.domain,
                b.downstream.pci.secondary_bus);
  return text;
}

hwloc_obj_t pciDeviceOf(hwloc_obj_t osdev) {
  hwloc_obj_t parent = osdev->parent;
  return parent != nullptr && parent->type == HWLOC_OBJ_PCI_DEVICE ? parent : nullptr;
}

std::vector<std::string> pciePath(hwloc_obj_t pcidev) {
  std::vector<std::string> path;
  for (hwloc_obj_t p = pcidev->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
    path.push_back(bridgeId(p));
  std::reverse(path.begin(), path.end());
  return path;
}

PciDevice describe(hwloc_topology_t topo, std::string name, hwloc_obj_t osdev, hwloc_obj_t pci) {
  PciDevice d;
  d.name = std::move(name);
  d.numa_node = numaOfObject(topo, osdev);
  if (pci != nullptr) {
    d.pci = pciBusId(pci);
    d.pcie_path = pciePath(pci);
  }
  return d;
}

bool startsWith(const char* text, std::string_view prefix) {
  return text != nullptr && std::string_view(text).substr(0, prefix.size()) == prefix;
}

// hwloc's CUDA backend marks its OS devices with subtype "CUDA" (2.x) and the
// CoProcType info (older exports); both appear in XML files in the wild.
bool isCudaDevice(hwloc_obj_t osdev) {
  if (osdev->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC) return false;
  if (osdev->subtype != nullptr && std::strcmp(osdev->subtype, "CUDA") == 0) return true;
  const char* kind = hwloc_obj_get_info_by_name(osdev, "CoProcType");
  return kind != nullptr && std::strcmp(kind, "CUDA") == 0;
}

// One PCI device that carries GPU or co-processor OS devices.
struct GpuCandidate {
  hwloc_obj_t pci = nullptr;
  hwloc_obj_t first_osdev = nullptr;
  std::string cuda_name;
  std::vector<std::string> names;  // the other GPU / co-processor OS devices, in hwloc order
};

// Without a CUDA name, prefer a management name (nvml0, rsmi0) over DRM nodes (card1).
std::string gpuName(const GpuCandidate& c) {
  if (!c.cuda_name.empty()) return c.cuda_name;
  for (const auto& n : c.names)
    if (!startsWith(n.c_str(), "card") && !startsWith(n.c_str(), "renderD")) return n;
  return c.names.empty() ? std::string() : c.names.front();
}

bool isComputeGpuVendor(hwloc_obj_t pci) {
  uint16_t vendor = pci->attr->pcidev.vendor_id;
  return vendor == kVendorNvidia || vendor == kVendorAmd;
}

// PCI address order; devices without one (software RDMA devices) last, by name.
bool byPciThenName(const PciDevice& a, const PciDevice& b) {
  if (a.pci.empty() != b.pci.empty()) return !a.pci.empty();
  if (a.pci != b.pci) return a.pci < b.pci;
  return a.name < b.name;
}

// A machine's hwloc XML is a few hundred KiB; anything this big is the wrong file.
constexpr uint64_t kMaxXmlBytes = 64 << 20;

}  // namespace

// Fills a Topology from a loaded hwloc topology.
class TopologyBuilder {
 public:
  static Result<Topology> build(hwloc_topology_t topo, std::string source) {
    Topology t;
    t.source_ = std::move(source);
    collectNuma(topo, &t);
    if (t.numa_.empty())
      return Status::InvalidArgument(t.source_ + ": the topology has no NUMA node");
    collectCores(topo, &t);
    collectNics(topo, &t);
    collectGpus(topo, &t);
    TENT_INFO(kTopology, "%s: %zu NUMA nodes, %zu cores, %zu RDMA devices, %zu GPUs",
              t.source_.c_str(), t.numa_.size(), t.cores_.size(), t.nics_.size(), t.gpus_.size());
    return t;
  }

 private:
  static void collectNuma(hwloc_topology_t topo, Topology* t) {
    hwloc_obj_t obj = nullptr;
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) != nullptr) {
      t->numa_.push_back({static_cast<int>(obj->os_index), bitmapToVector(obj->cpuset)});
    }
    std::sort(t->numa_.begin(), t->numa_.end(),
              [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  }

  // Cores, or hardware threads when the topology does not describe cores.
  static void collectCores(hwloc_topology_t topo, Topology* t) {
    hwloc_obj_type_t type =
        hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    hwloc_obj_t obj = nullptr;
    while ((obj = hwloc_get_next_obj_by_type(topo, type, obj)) != nullptr) {
      CpuCore core;
      core.id = static_cast<int>(obj->os_index);
      core.numa_node = numaOfObject(topo, obj);
      core.cpus = bitmapToVector(obj->cpuset);
      if (!core.cpus.empty()) t->cores_.push_back(std::move(core));
    }
    std::sort(t->cores_.begin(), t->cores_.end(),
              [](const CpuCore& a, const CpuCore& b) { return a.cpus.front() < b.cpus.front(); });
  }

  static void collectNics(hwloc_topology_t topo, Topology* t) {
    hwloc_obj_t osdev = nullptr;
    while ((osdev = hwloc_get_next_osdev(topo, osdev)) != nullptr) {
      if (osdev->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || osdev->name == nullptr)
        continue;
      t->nics_.push_back(describe(topo, osdev->name, osdev, pciDeviceOf(osdev)));
    }
    std::sort(t->nics_.begin(), t->nics_.end(), byPciThenName);
  }

  // One GPU per PCI device. When any device has a CUDA OS device, the GPUs are exactly
  // those (cuda:N must match CUDA's devices); otherwise PCI devices of NVIDIA or AMD
  // with a GPU / co-processor OS device, which leaves out a server's BMC display.
  static void collectGpus(hwloc_topology_t topo, Topology* t) {
    std::map<hwloc_obj_t, GpuCandidate> by_pci;
    hwloc_obj_t osdev = nullptr;
    while ((osdev = hwloc_get_next_osdev(topo, osdev)) != nullptr) {
      auto type = osdev->attr->osdev.type;
      if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
      hwloc_obj_t pci = pciDeviceOf(osdev);
      if (pci == nullptr || osdev->name == nullptr) continue;
      GpuCandidate& c = by_pci[pci];
      c.pci = pci;
      if (c.first_osdev == nullptr) c.first_osdev = osdev;
      if (isCudaDevice(osdev) && c.cuda_name.empty()) {
        c.cuda_name = osdev->name;
      } else {
        c.names.emplace_back(osdev->name);
      }
    }
    bool any_cuda = std::any_of(by_pci.begin(), by_pci.end(),
                                [](const auto& kv) { return !kv.second.cuda_name.empty(); });
    for (const auto& [pci, c] : by_pci) {
      bool is_gpu = any_cuda ? !c.cuda_name.empty() : isComputeGpuVendor(pci);
      if (is_gpu) t->gpus_.push_back(describe(topo, gpuName(c), c.first_osdev, pci));
    }
    std::sort(t->gpus_.begin(), t->gpus_.end(), byPciThenName);
  }
};

namespace {

// Keeps bridges, PCI devices and OS devices: hwloc drops every I/O object by default,
// for live discovery and XML import alike.
Status keepIoObjects(hwloc_topology_t topo) {
  if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
    return Status::Internal(std::string("hwloc: cannot keep I/O objects: ") + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace

Result<Topology> Topology::loadLive() {
  HwlocHandle h;
  if (!h.ok()) return Status::Internal("hwloc_topology_init failed");
  TENT_RETURN_IF_ERROR(keepIoObjects(h.get()));
  // On Linux hwloc's own linux component reads the PCI tree from sysfs; the libpciaccess
  // component only adds marketing names (unused here) and leaks ~1 KiB per load, which
  // fails LeakSanitizer runs of every test that loads the live machine.
  (void)hwloc_topology_set_components(h.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(h.get()) != 0) {
    return Status::Internal(std::string("hwloc could not discover this machine: ") +
                            std::strerror(errno));
  }
  return TopologyBuilder::build(h.get(), "live");
}

Result<Topology> Topology::loadXml(const std::string& path) {
  BoundedFileOptions options;
  options.max_bytes = kMaxXmlBytes;
  TENT_ASSIGN_OR_RETURN(BoundedFile file, readBoundedFile(path, "topology.xml_file", options));
  return loadXmlBuffer(file.bytes, path);
}

Result<Topology> Topology::loadXmlBuffer(std::string_view xml, std::string source_name) {
  // hwloc reports these cases only as EINVAL (and prints to stderr for some), so
  // recognise them first to give one clear message.
  if (xml.find("<topology") == std::string_view::npos) {
    return Status::InvalidArgument(source_name + ": not an hwloc XML topology (no <topology>)");
  }
  // hwloc's XML importer silently drops the objects that follow a comment inside the
  // topology (seen with hwloc 2.9): refuse rather than describe half a machine.
  if (xml.find("<!--", xml.find("<topology")) != std::string_view::npos) {
    return Status::InvalidArgument(source_name +
                                   ": XML comments inside <topology> are not supported (hwloc "
                                   "drops the objects after them); remove them");
  }
  if (xml.find("NUMANode") == std::string_view::npos) {
    return Status::InvalidArgument(source_name + ": the topology has no NUMA node");
  }
  HwlocHandle h;
  if (!h.ok()) return Status::Internal("hwloc_topology_init failed");
  TENT_RETURN_IF_ERROR(keepIoObjects(h.get()));
  std::string terminated(xml);  // hwloc wants the length including a final '\0'
  if (hwloc_topology_set_xmlbuffer(h.get(), terminated.c_str(),
                                   static_cast<int>(terminated.size() + 1)) != 0) {
    return Status::InvalidArgument(source_name + ": invalid hwloc XML");
  }
  if (hwloc_topology_load(h.get()) != 0) {
    return Status::InvalidArgument(source_name + ": hwloc rejected the topology (" +
                                   std::strerror(errno) + ")");
  }
  return TopologyBuilder::build(h.get(), std::move(source_name));
}

Result<Topology> Topology::load(const config::TopologyConfig& config) {
  return config.xml_file.empty() ? loadLive() : loadXml(config.xml_file);
}

std::vector<int> Topology::cpusOfNuma(int numa_node) const {
  for (const auto& n : numa_)
    if (n.id == numa_node) return n.cpus;
  return {};
}

int Topology::numaOfCpu(int cpu) const {
  for (const auto& n : numa_)
    if (std::binary_search(n.cpus.begin(), n.cpus.end(), cpu)) return n.id;
  return -1;
}

}  // namespace tent::topology
