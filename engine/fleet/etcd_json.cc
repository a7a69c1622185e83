#include "fleet/etcd_json.h"

#include <nlohmann/json.hpp>

namespace tent::fleet {

namespace {

using json = nlohmann::json;
constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

Result<json> parseJson(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("etcd answer is not JSON");
  if (!j.is_object()) return Status::InvalidArgument("etcd answer is not a JSON object");
  return j;
}

// etcd's gateway writes int64 as strings ("12"), and leaves out zero values.
Result<int64_t> int64Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return Status::InvalidArgument(std::string("etcd field ") + name);
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > 20) return Status::InvalidArgument(std::string("etcd field ") + name);
  int64_t v = 0;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return Status::InvalidArgument(std::string("etcd field ") + name);
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return Status::InvalidArgument(std::string("etcd field ") + name);
    if (v > (INT64_MAX - (s[i] - '0')) / 10)
      return Status::InvalidArgument(std::string("etcd field ") + name);
    v = v * 10 + (s[i] - '0');
  }
  return s[0] == '-' ? -v : v;
}

Result<std::string> bytesField(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end()) return std::string();
  if (!it->is_string()) return Status::InvalidArgument(std::string("etcd field ") + name);
  return base64Decode(it->get_ref<const std::string&>());
}

Result<KeyValue> parseKv(const json& kv) {
  if (!kv.is_object()) return Status::InvalidArgument("etcd kv is not an object");
  KeyValue out;
  TENT_ASSIGN_OR_RETURN(out.key, bytesField(kv, "key"));
  TENT_ASSIGN_OR_RETURN(out.value, bytesField(kv, "value"));
  TENT_ASSIGN_OR_RETURN(out.mod_revision, int64Field(kv, "mod_revision"));
  TENT_ASSIGN_OR_RETURN(out.lease, int64Field(kv, "lease"));
  return out;
}

int64_t headerRevision(const json& obj) {
  auto h = obj.find("header");
  if (h == obj.end() || !h->is_object()) return 0;
  auto r = int64Field(*h, "revision");
  return r.ok() ? *r : 0;
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return Status::InvalidArgument("bad base64 length");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = sextet(c);
    if (v < 0) return Status::InvalidArgument("bad base64 character");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string prefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string rangeBody(std::string_view key, std::string_view range_end) {
  json j = {{"key", base64Encode(key)}};
  if (!range_end.empty()) j["range_end"] = base64Encode(range_end);
  return j.dump();
}

std::string putBody(std::string_view key, std::string_view value, int64_t lease) {
  json j = {{"key", base64Encode(key)}, {"value", base64Encode(value)}};
  if (lease != 0) j["lease"] = std::to_string(lease);
  return j.dump();
}

std::string deleteBody(std::string_view key) {
  return json{{"key", base64Encode(key)}}.dump();
}

std::string leaseGrantBody(int64_t ttl_s) {
  return json{{"TTL", std::to_string(ttl_s)}}.dump();
}

std::string leaseIdBody(int64_t lease) {
  return json{{"ID", std::to_string(lease)}}.dump();
}

std::string watchBody(std::string_view prefix, int64_t start_revision) {
  json create = {{"key", base64Encode(prefix)}, {"range_end", base64Encode(prefixEnd(prefix))}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  return json{{"create_request", create}}.dump();
}

std::string authBody(std::string_view user, std::string_view password) {
  return json{{"name", std::string(user)}, {"password", std::string(password)}}.dump();
}

Status parseError(std::string_view body) {
  auto j = parseJson(body);
  if (!j.ok()) return Status::OK();
  auto e = j->find("error");
  if (e == j->end()) return Status::OK();
  std::string what = e->is_string() ? e->get<std::string>() : "error";
  auto code = int64Field(*j, "code");
  // gRPC codes: 14 unavailable, 4 deadline, 16 unauthenticated, 7 permission denied.
  const int64_t c = code.ok() ? *code : 0;
  if (c == 16 || c == 7) return Status::PermissionDenied("etcd: " + what);
  if (c == 14 || c == 4) return Status::Unavailable("etcd: " + what);
  return Status::Internal("etcd: " + what);
}

Result<std::vector<KeyValue>> parseRange(std::string_view body, int64_t* revision) {
  TENT_ASSIGN_OR_RETURN(json j, parseJson(body));
  if (revision) *revision = headerRevision(j);
  std::vector<KeyValue> out;
  auto kvs = j.find("kvs");
  if (kvs == j.end()) return out;
  if (!kvs->is_array()) return Status::InvalidArgument("etcd range: kvs is not a list");
  for (const json& kv : *kvs) {
    TENT_ASSIGN_OR_RETURN(KeyValue v, parseKv(kv));
    out.push_back(std::move(v));
  }
  return out;
}

Result<int64_t> parseLeaseGrant(std::string_view body) {
  TENT_ASSIGN_OR_RETURN(json j, parseJson(body));
  TENT_ASSIGN_OR_RETURN(int64_t id, int64Field(j, "ID"));
  if (id == 0) return Status::InvalidArgument("etcd lease grant without an ID");
  return id;
}

Result<int64_t> parseKeepAlive(std::string_view body) {
  TENT_ASSIGN_OR_RETURN(json j, parseJson(body));
  auto r = j.find("result");
  if (r == j.end() || !r->is_object()) return Status::InvalidArgument("etcd keepalive: no result");
  return int64Field(*r, "TTL");
}

Result<std::string> parseAuthToken(std::string_view body) {
  TENT_ASSIGN_OR_RETURN(json j, parseJson(body));
  auto t = j.find("token");
  if (t == j.end() || !t->is_string() || t->get_ref<const std::string&>().empty())
    return Status::InvalidArgument("etcd authenticate: no token");
  return t->get<std::string>();
}

Result<WatchMessage> parseWatchMessage(std::string_view text) {
  TENT_ASSIGN_OR_RETURN(json j, parseJson(text));
  if (Status e = parseError(text); !e.ok()) return e;
  auto r = j.find("result");
  if (r == j.end() || !r->is_object()) return Status::InvalidArgument("etcd watch: no result");
  WatchMessage m;
  m.revision = headerRevision(*r);
  m.created = r->value("created", false) == true;
  m.canceled = r->value("canceled", false) == true;
  auto events = r->find("events");
  if (events == r->end()) return m;
  if (!events->is_array()) return Status::InvalidArgument("etcd watch: events is not a list");
  for (const json& e : *events) {
    if (!e.is_object()) return Status::InvalidArgument("etcd watch: event is not an object");
    WatchEvent ev;
    auto type = e.find("type");
    ev.deleted = type != e.end() && type->is_string() && *type == "DELETE";
    auto kv = e.find("kv");
    if (kv == e.end()) return Status::InvalidArgument("etcd watch: event without kv");
    TENT_ASSIGN_OR_RETURN(ev.kv, parseKv(*kv));
    m.events.push_back(std::move(ev));
  }
  return m;
}

Result<std::vector<std::string>> takeLines(std::string* buffer, size_t max_line) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = buffer->find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = buffer->substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  buffer->erase(0, start);
  if (buffer->size() > max_line) return Status::InvalidArgument("etcd watch: line too long");
  return lines;
}

}  // namespace tent::fleet
