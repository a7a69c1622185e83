// The segment descriptor a control listener serves: this engine's devices and
// registered buffers, with per-region locations and per-device rkeys. Peers cache
// it and route requests with it. Versioned binary encoding; the parser rejects
// malformed input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::metadata {

inline constexpr uint32_t kDescriptorMagic = 0x47455354;  // "TSEG" little-endian
// Versioning rule (docs/engine.md): v1 is flat. From v2 on, the header, every device and
// every buffer is a length-prefixed record; a writer adds fields only at the end of a
// record and bumps the version, a reader takes the fields it knows and skips the rest
// of each record. So a v2 reader reads v3+ descriptors; only v1 readers need v1, and
// they get it (GET_DESCRIPTOR carries the newest version the asker reads).
inline constexpr uint16_t kDescriptorVersionV1 = 1;
inline constexpr uint16_t kDescriptorVersionV2 = 2;
// v3: the header adds max_bootstrap_version; each buffer adds name, access, registration seq.
inline constexpr uint16_t kDescriptorVersion = 3;
// What a peer whose descriptor does not say (v1, v2) reads.
inline constexpr uint16_t kUnadvertisedBootstrapVersion = 2;
// BufferDescriptor::access bits (v3+); 0 = not advertised (a v1/v2 peer).
inline constexpr uint8_t kBufferRemoteRead = 1;
inline constexpr uint8_t kBufferRemoteWrite = 2;
inline constexpr size_t kMaxBufferNameBytes = 255;
inline constexpr size_t kMaxDescriptorDevices = 64;
inline constexpr size_t kMaxDescriptorBuffers = 1u << 20;
inline constexpr size_t kMaxBufferRegions = 1024;

struct DeviceDescriptor {
  std::string name;
  fabric::PortIdentity port;
  int32_t numa_node = -1;
  bool operator==(const DeviceDescriptor&) const = default;
};

struct RegionDescriptor {
  uint64_t addr = 0;
  uint64_t length = 0;
  std::string location;         // "cpu:0", "cuda:3", "*"
  std::vector<uint16_t> rank0;  // device indices of rank 0 for this location
  bool operator==(const RegionDescriptor&) const = default;
};

struct BufferDescriptor {
  uint64_t addr = 0;
  uint64_t length = 0;
  std::vector<RegionDescriptor> regions;  // cover the buffer, sorted by addr
  std::vector<uint32_t> rkeys;            // per device index
  // v3+ (a v1/v2 descriptor parses as "", 0, 0).
  std::string name;   // given at registration; may be empty
  uint8_t access = 0;  // kBufferRemoteRead | kBufferRemoteWrite; 0 = not advertised
  uint64_t seq = 0;    // registration order within the segment (1 = first); 0 = unknown
  bool operator==(const BufferDescriptor&) const = default;
};

struct SegmentDescriptor {
  std::string name;       // "host:port"
  uint64_t instance = 0;  // random per engine: a restarted peer has a new one
  uint64_t version = 0;   // bumps on every register/unregister
  // v3+: the newest bootstrap version this engine reads (older descriptors: 2).
  uint16_t max_bootstrap_version = kUnadvertisedBootstrapVersion;
  std::vector<DeviceDescriptor> devices;
  std::vector<BufferDescriptor> buffers;  // sorted by addr
  bool operator==(const SegmentDescriptor&) const = default;

  // The buffer containing [addr, addr+length), or nullptr.
  const BufferDescriptor* findBuffer(uint64_t addr, uint64_t length) const noexcept;
  int deviceIndex(std::string_view name) const noexcept;  // -1 when absent
};

std::vector<uint8_t> encodeDescriptor(const SegmentDescriptor& d,
                                      uint16_t version = kDescriptorVersion);
Result<SegmentDescriptor> parseDescriptor(std::span<const uint8_t> bytes);

}  // namespace tent::metadata
