// etcd v3's JSON gateway (/v3/...): request bodies and the parsing of its answers.
// Pure functions, no I/O: what etcd (or anyone who can answer in its place) sends is
// untrusted, so every parser returns a Status on malformed input and is fuzzed
// (tests/fuzz/fuzz_etcd_json.cc). Keys and values travel base64-encoded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"

namespace tent::fleet {

std::string base64Encode(std::string_view bytes);
Result<std::string> base64Decode(std::string_view text);
// The first key after every key starting with `prefix` (etcd's range_end for a prefix).
std::string prefixEnd(std::string_view prefix);

struct KeyValue {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct WatchEvent {
  bool deleted = false;  // DELETE (the key is gone: removed, or its lease expired)
  KeyValue kv;
};

// One message of a watch stream.
struct WatchMessage {
  bool created = false;
  bool canceled = false;
  int64_t revision = 0;  // header.revision
  std::vector<WatchEvent> events;
};

// Request bodies.
std::string rangeBody(std::string_view key, std::string_view range_end = {});
std::string putBody(std::string_view key, std::string_view value, int64_t lease);
std::string deleteBody(std::string_view key);
std::string leaseGrantBody(int64_t ttl_s);
std::string leaseIdBody(int64_t lease);  // keepalive, revoke
std::string watchBody(std::string_view prefix, int64_t start_revision);
std::string authBody(std::string_view user, std::string_view password);

// An error answer ({"error": ..., "code": N}) as a Status; OK when `body` is none.
Status parseError(std::string_view body);
// /v3/kv/range: the keys found (none: empty) and the header's revision.
Result<std::vector<KeyValue>> parseRange(std::string_view body, int64_t* revision = nullptr);
// /v3/lease/grant: the lease id.
Result<int64_t> parseLeaseGrant(std::string_view body);
// /v3/lease/keepalive: the remaining TTL; 0 when etcd no longer knows the lease.
Result<int64_t> parseKeepAlive(std::string_view body);
// /v3/auth/authenticate: the token.
Result<std::string> parseAuthToken(std::string_view body);
// One JSON object of a watch stream ({"result": {...}}).
Result<WatchMessage> parseWatchMessage(std::string_view json);

// Splits a watch stream into its JSON objects (one per line, as the gateway sends
// them); whatever is incomplete stays in `buffer`. Bounded: a line past `max_line`
// is an error.
Result<std::vector<std::string>> takeLines(std::string* buffer, size_t max_line = 4u << 20);

}  // namespace tent::fleet
