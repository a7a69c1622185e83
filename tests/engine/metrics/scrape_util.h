// Helpers for the metrics tests: a plain-socket HTTP GET (no external tools) and a
// parser of the Prometheus text format, enough for what the exporter writes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tent::metrics::testing {

struct HttpReply {
  int status = 0;     // 0: no reply (connect or read failed)
  std::string body;   // after the blank line
  std::string error;  // why status is 0
};

// GET `path` from 127.0.0.1:`port` with HTTP/1.0 (the server closes after the reply).
// Every socket call is bounded by a 10 s timeout, so a silent server fails the test.
inline HttpReply httpGet(uint16_t port, const std::string& path) {
  HttpReply reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {0, "", "socket failed"};
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {0, "", "connect failed"};
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return {0, "", "send failed"};
  }
  std::string raw;
  char buf[16384];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) {
    return {0, "", "no HTTP reply: '" + raw.substr(0, 200) + "'"};
  }
  reply.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  reply.body = raw.substr(head_end + 4);
  return reply;
}

struct Sample {
  std::string name;                           // as written: "tent_x_bucket"
  std::map<std::string, std::string> labels;  // sorted by name
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> "counter", "gauge", ...
  std::vector<Sample> samples;
  std::vector<std::string> errors;  // lines that did not parse
};

// Label values as the text format escapes them: \\, \" and \n.
inline bool parseLabels(const std::string& text, std::map<std::string, std::string>* out) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t eq = text.find("=\"", at);
    if (eq == std::string::npos) return false;
    const std::string name = text.substr(at, eq - at);
    std::string value;
    size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        value += text[i] == 'n' ? '\n' : text[i];
      } else {
        value += text[i];
      }
    }
    if (i >= text.size()) return false;
    (*out)[name] = value;
    at = i + 1;
    if (at < text.size() && text[at] == ',') ++at;
  }
  return true;
}

inline Exposition parseExposition(const std::string& body) {
  Exposition e;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      e.types[name] = type;
      continue;
    }
    Sample s;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    size_t name_end = space;
    if (brace != std::string::npos && brace < space) {
      const size_t close = line.rfind('}');
      if (close == std::string::npos ||
          !parseLabels(line.substr(brace + 1, close - brace - 1), &s.labels)) {
        e.errors.push_back(line);
        continue;
      }
      name_end = brace;
    }
    if (space == std::string::npos) {
      e.errors.push_back(line);
      continue;
    }
    s.name = line.substr(0, name_end);
    s.value = std::strtod(line.c_str() + space + 1, nullptr);  // also "Nan", "+Inf"
    e.samples.push_back(std::move(s));
  }
  return e;
}

}  // namespace tent::metrics::testing
