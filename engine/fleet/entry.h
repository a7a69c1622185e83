// What an engine stores in etcd under <prefix>segments/<name>: its segment descriptor
// as the control port serves it (bytes of wire/segment_descriptor, not re-encoded),
// wrapped in an envelope that adds what etcd mode needs, and a tag.
//
//   "TENTSEG1" | u64 instance | u16 address length | address ("host:port" of the
//   control listener) | u32 descriptor length | descriptor | u8 signed | [32-byte tag]
//   integers little-endian; tag = HMAC-SHA256(cluster secret, "tent-fleet-entry" |
//   u16 name length | name | every byte before the tag).
//
// The tag binds the entry to its name: an entry copied to another name does not verify.
// The same bytes are the metadata blob (localMetadata / addRemoteMetadata), with the
// name inside the envelope's signed part by the same rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/auth.h"
#include "tent/status.h"

namespace tent::fleet {

struct Entry {
  std::string name;  // the segment name (the key's last part; not stored twice)
  uint64_t instance = 0;
  std::string address;  // host:port of the control listener
  std::vector<uint8_t> descriptor;
  bool is_signed = false;
};

// Signed when `secret` is not empty.
std::string encodeEntry(const Entry& e, const control::Secret& secret);
// Parses `bytes` stored under `name`. With a secret, an unsigned entry or a wrong tag
// is PermissionDenied (forged, or written by an engine of another cluster); malformed
// bytes are InvalidArgument.
Result<Entry> decodeEntry(std::string_view name, std::string_view bytes,
                          const control::Secret& secret);

// A blob: the name travels inside (u16 name length | name | entry).
std::string encodeBlob(const Entry& e, const control::Secret& secret);
Result<Entry> decodeBlob(std::string_view bytes, const control::Secret& secret);

}  // namespace tent::fleet
