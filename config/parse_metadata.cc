// The `metadata` section: how engines find each other (peer to peer, or etcd).
// docs/config.md, "metadata", is the prose for what is here.
#include <algorithm>
#include <map>
#include <string>

#include "config/parse.h"

namespace tent::config::detail {
namespace {

constexpr int64_t kMaxLeaseTtlS = 3600;
constexpr int64_t kMaxEtcdTimeoutMs = 600000;

const EnumNames<MetadataBackend> kBackends = {{"p2p", MetadataBackend::kP2p},
                                              {"etcd", MetadataBackend::kEtcd}};

// A key prefix: starts with '/', printable, no spaces (it becomes part of URLs' bodies
// base64-encoded, but operators read it in etcdctl output).
bool validPrefix(std::string_view s) {
  return !s.empty() && s.size() <= 256 && s.front() == '/' &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
}

// A segment name: what peers open. Printable, no spaces, no '/' (it is a key's last part).
bool validSegmentName(std::string_view s) {
  return s.size() <= 255 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127 && c != '/'; });
}

constexpr TextRule kPrefix{"a key prefix starting with '/', printable, no spaces (<= 256)",
                           validPrefix};
constexpr TextRule kSegmentName{
    "a name of printable characters without spaces or '/' (<= 255), or empty for host:port",
    validSegmentName};
constexpr TextRule kFileOrEmpty{"a file path, or empty", nullptr};
constexpr TextRule kUser{"an etcd user name, or empty", nullptr};

void readEtcd(MapReader& m, EtcdConfig* e) {
  std::map<std::string, std::string> seen;
  m.stringList("endpoints", &e->endpoints, "host:port of etcd members",
               [&](std::string_view ep, size_t i) -> std::string {
                 if (!isHostPort(ep) || ep.substr(ep.rfind(':') + 1) == "0")
                   return "expected host:port of an etcd member (port in [1, 65535]), got '" +
                          std::string(ep) + "'";
                 const std::string here = m.pathOf("endpoints") + "[" + std::to_string(i) + "]";
                 auto [it, fresh] = seen.emplace(ep, here);
                 return fresh ? ""
                              : "duplicate endpoint '" + std::string(ep) + "' (already given at " +
                                    it->second + ")";
               });
  m.text("prefix", &e->prefix, kPrefix);
  m.integer("lease_ttl_s", &e->lease_ttl_s, 2, kMaxLeaseTtlS);
  m.integer("request_timeout_ms", &e->request_timeout_ms, 1, kMaxEtcdTimeoutMs);
  m.integer("retry_initial_ms", &e->retry_initial_ms, 1, kMaxEtcdTimeoutMs);
  m.integer("retry_max_ms", &e->retry_max_ms, 1, kMaxEtcdTimeoutMs);
  m.text("user", &e->user, kUser);
  m.text("password_file", &e->password_file, kFileOrEmpty);
  m.section("tls", [&](MapReader& t) {
    t.text("ca_file", &e->tls.ca_file, kFileOrEmpty);
    t.text("cert_file", &e->tls.cert_file, kFileOrEmpty);
    t.text("key_file", &e->tls.key_file, kFileOrEmpty);
    if (!t.parsing()) return;
    if (e->tls.cert_file.empty() != e->tls.key_file.empty())
      t.fail(e->tls.cert_file.empty() ? "key_file" : "cert_file",
             "cert_file and key_file are given together (a client certificate and its key)");
    if (!e->tls.cert_file.empty() && e->tls.ca_file.empty())
      t.fail("cert_file", "a client certificate needs tls.ca_file (https)");
  });
  if (!m.parsing()) return;
  if (e->retry_initial_ms > e->retry_max_ms)
    m.fail("retry_initial_ms", "must not exceed retry_max_ms (" + std::to_string(e->retry_max_ms) +
                                   "), got " + std::to_string(e->retry_initial_ms));
  if (e->user.empty() != e->password_file.empty())
    m.fail(e->user.empty() ? "password_file" : "user",
           "user and password_file are given together, or neither");
}

}  // namespace

void readMetadata(MapReader& m, MetadataConfig* md) {
  m.choice("backend", &md->backend, kBackends);
  m.text("name", &md->name, kSegmentName);
  m.section("etcd", [&](MapReader& e) { readEtcd(e, &md->etcd); });
  if (!m.parsing()) return;
  if (md->backend == MetadataBackend::kEtcd && md->etcd.endpoints.empty())
    m.fail("backend", "etcd needs metadata.etcd.endpoints (host:port of at least one member)");
  if (md->backend == MetadataBackend::kP2p && !md->name.empty())
    m.fail("name",
           "a name of its own needs backend: etcd (with p2p a segment's name is its "
           "host:port)");
}

}  // namespace tent::config::detail
