// Real etcd processes on loopback ports for the `etcd` suite: one member or a
// cluster of three, each with its own data directory (removed at the end). Tests
// skip (GTEST_SKIP with the reason) where the etcd binary is not installed
// (scripts/ensure-build.sh installs etcd-server). Every wait is bounded.
#pragma once

#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tent::testing {

inline std::string etcdBinary() {
  if (const char* e = std::getenv("TENT_ETCD")) return e;
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// A free loopback port (bound to 0, closed): good enough for a test's processes.
inline int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// One POST to a member's gateway, blocking, bounded: the HTTP status (0: no answer),
// the body in `*body`. `ca_file` set: https, etcd's certificate checked against it.
inline long etcdPost(const std::string& endpoint, const std::string& path, const std::string& json,
                     const std::string& ca_file = "", const std::string& token = "",
                     std::string* body = nullptr, double seconds = 2) {
  CURL* c = curl_easy_init();
  const std::string url = (ca_file.empty() ? "http://" : "https://") + endpoint + path;
  std::string sink;
  curl_slist* headers = nullptr;
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: " + token).c_str());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(seconds * 1000));
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  if (!ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body ? body : &sink);
  curl_easy_setopt(
      c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* out) {
        static_cast<std::string*>(out)->append(d, s * n);
        return s * n;
      });
  long code = 0;
  if (curl_easy_perform(c) != CURLE_OK ||
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
    code = 0;
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return code;
}

// True when a member answers a range request with HTTP 200. With auth enabled an
// unauthenticated range is refused, but the member answered: any HTTP status counts then.
inline bool etcdAnswers(const std::string& endpoint, double seconds = 2,
                        const std::string& ca_file = "", bool any_status = false) {
  const long code =
      etcdPost(endpoint, "/v3/kv/range", "{\"key\":\"AA==\"}", ca_file, "", nullptr, seconds);
  return any_status ? code != 0 : code == 200;
}

// etcd's TLS material, made with openssl in `dir`: a CA, a server certificate it
// signed for 127.0.0.1, and a second CA that signed nothing (the wrong CA).
struct EtcdTls {
  std::string dir, ca, server_cert, server_key, other_ca;
  static bool opensslInstalled() { return std::system("openssl version >/dev/null 2>&1") == 0; }
  bool make(const std::string& d) {
    dir = d;
    ca = dir + "/ca.pem";
    server_cert = dir + "/server.pem";
    server_key = dir + "/server.key";
    other_ca = dir + "/other-ca.pem";
    const std::string q = " >/dev/null 2>&1";
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    {
      std::FILE* f = std::fopen((dir + "/san.cnf").c_str(), "w");
      if (f == nullptr) return false;
      std::fputs("subjectAltName=IP:127.0.0.1\n", f);
      std::fclose(f);
    }
    const std::string cmds[] = {"openssl req -x509" + ec + " -keyout " + dir + "/ca.key -out " +
                                    ca + " -days 2 -subj /CN=tent-test-ca" + q,
                                "openssl req" + ec + " -keyout " + server_key + " -out " + dir +
                                    "/server.csr -subj /CN=127.0.0.1" + q,
                                "openssl x509 -req -in " + dir + "/server.csr -CA " + ca +
                                    " -CAkey " + dir + "/ca.key -CAcreateserial -out " +
                                    server_cert + " -days 2 -extfile " + dir + "/san.cnf" + q,
                                "openssl req -x509" + ec + " -keyout " + dir +
                                    "/other-ca.key -out " + other_ca +
                                    " -days 2 -subj /CN=tent-test-other-ca" + q};
    for (const std::string& c : cmds)
      if (std::system(c.c_str()) != 0) return false;
    return true;
  }
};

class EtcdCluster {
 public:
  explicit EtcdCluster(int members) : members_(members) {
    char tmpl[] = "/tmp/tent-etcd-XXXXXX";
    root_ = ::mkdtemp(tmpl) ? tmpl : "";
    for (int i = 0; i < members; ++i) {
      client_.push_back(freeLoopbackPort());
      peer_.push_back(freeLoopbackPort());
      pids_.push_back(-1);
    }
  }
  ~EtcdCluster() {
    for (int i = 0; i < members_; ++i) kill(i);
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (int p : client_) out.push_back("127.0.0.1:" + std::to_string(p));
    return out;
  }
  // YAML flow list of the endpoints: ["127.0.0.1:1", ...]
  std::string endpointsYaml() const {
    std::string s = "[";
    for (const auto& e : endpoints()) s += (s.size() > 1 ? ", \"" : "\"") + e + "\"";
    return s + "]";
  }

  // The directory removed with the cluster (TLS material, password files go there).
  const std::string& root() const { return root_; }
  // Members serve https with this certificate (before start()).
  void useTls(const EtcdTls& tls) { tls_ = tls; }
  // With auth enabled, a member that refuses an unauthenticated request is up.
  void authEnabled() { auth_ = true; }

  // Starts every member and waits (bounded) until each answers.
  bool start() {
    for (int i = 0; i < members_; ++i)
      if (!spawn(i)) return false;
    for (int i = 0; i < members_; ++i)
      if (!waitUp(i)) return false;
    return true;
  }
  void kill(int i) {
    if (pids_[i] <= 0) return;
    ::kill(pids_[i], SIGKILL);
    ::waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
  }
  // `wipe`: its data directory emptied first (etcd lost everything).
  bool restart(int i, bool wipe) {
    kill(i);
    if (wipe) std::filesystem::remove_all(dataDir(i));
    return spawn(i) && waitUp(i);
  }
  bool waitUp(int i, double seconds = 60) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (etcdAnswers(endpoints()[i], 2, tls_.ca, auth_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string dataDir(int i) const { return root_ + "/m" + std::to_string(i); }
  std::string peerUrl(int i) const { return "http://127.0.0.1:" + std::to_string(peer_[i]); }
  bool spawn(int i) {
    std::string cluster;
    for (int j = 0; j < members_; ++j)
      cluster += (j ? "," : "") + std::string("m") + std::to_string(j) + "=" + peerUrl(j);
    const std::string client = (tls_.ca.empty() ? "http://" : "https://") +
                               std::string("127.0.0.1:") + std::to_string(client_[i]);
    std::vector<std::string> args = {etcdBinary(),
                                     "--name",
                                     "m" + std::to_string(i),
                                     "--data-dir",
                                     dataDir(i),
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peerUrl(i),
                                     "--initial-advertise-peer-urls",
                                     peerUrl(i),
                                     "--initial-cluster",
                                     cluster,
                                     "--initial-cluster-token",
                                     "tent-test-" + root_,
                                     "--initial-cluster-state",
                                     "new",
                                     "--log-level",
                                     "error",
                                     "--heartbeat-interval",
                                     "50",
                                     "--election-timeout",
                                     "500"};
    if (!tls_.ca.empty())
      args.insert(args.end(), {"--cert-file", tls_.server_cert, "--key-file", tls_.server_key});
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ::setpgid(0, 0);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (std::freopen((root_ + "/m" + std::to_string(i) + ".log").c_str(), "a", stderr) == nullptr)
        _exit(126);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    pids_[i] = pid;
    return true;
  }

  int members_;
  std::string root_;
  std::vector<int> client_, peer_;
  std::vector<pid_t> pids_;
  EtcdTls tls_;
  bool auth_ = false;
};

}  // namespace tent::testing
