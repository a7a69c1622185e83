#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cstring>

#include "base/bounded_file.h"

namespace tent::control {

namespace {

// A secret is tens of bytes; a file this big is the wrong one.
constexpr uint64_t kMaxSecretFileBytes = 64 << 10;

std::string where(const std::string& path) {
  return "bootstrap.auth.secret_file '" + path + "': ";
}

metadata::Mac hmac(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  metadata::Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(),
       &len);
  return out;
}

std::vector<uint8_t> labelled(std::string_view label, const metadata::Nonce& a,
                              const metadata::Nonce& b) {
  std::vector<uint8_t> v(label.begin(), label.end());
  v.insert(v.end(), a.begin(), a.end());
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

std::span<const uint8_t> bytesOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

Result<Secret> Secret::load(const std::string& path) {
  BoundedFileOptions options;
  options.max_bytes = kMaxSecretFileBytes;
  options.no_follow = true;
  auto file = readBoundedFile(path, "bootstrap.auth.secret_file", options);
  if (!file.ok()) return file.status();
  if ((file->mode & (S_IRWXG | S_IRWXO)) != 0) {
    return Status::PermissionDenied(where(path) +
                                    "is readable or writable by its group or others; "
                                    "chmod 600 it (it holds the cluster secret)");
  }
  std::string bytes = std::move(file->bytes);
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  if (!bytes.empty() && bytes.back() == '\r') bytes.pop_back();
  if (bytes.size() < kMinSecretBytes)
    return Status::InvalidArgument(where(path) + "holds " + std::to_string(bytes.size()) +
                                   " bytes of secret; at least " + std::to_string(kMinSecretBytes) +
                                   " are needed (e.g. 64 hex characters)");
  return fromBytes(std::move(bytes));
}

Secret Secret::fromBytes(std::string bytes) {
  Secret s;
  s.key_ = std::move(bytes);
  return s;
}

metadata::Mac Secret::serverProof(const metadata::Nonce& client,
                                  const metadata::Nonce& server) const {
  return hmac(bytesOf(key_), labelled("tent-server", client, server));
}

metadata::Mac Secret::clientProof(const metadata::Nonce& client,
                                  const metadata::Nonce& server) const {
  return hmac(bytesOf(key_), labelled("tent-client", server, client));
}

metadata::Mac Secret::tag(std::string_view label, std::span<const uint8_t> data) const {
  std::vector<uint8_t> v(label.begin(), label.end());
  v.insert(v.end(), data.begin(), data.end());
  return hmac(bytesOf(key_), v);
}

std::vector<uint8_t> Secret::sessionKey(const metadata::Nonce& client,
                                        const metadata::Nonce& server) const {
  metadata::Mac k = hmac(bytesOf(key_), labelled("tent-session", client, server));
  return std::vector<uint8_t>(k.begin(), k.end());
}

metadata::Nonce randomNonce() {
  metadata::Nonce n{};
  size_t got = 0;
  while (got < n.size()) {
    const ssize_t r = getrandom(n.data() + got, n.size() - got, 0);
    if (r > 0) got += static_cast<size_t>(r);
  }
  return n;
}

bool equalMacs(const metadata::Mac& a, const metadata::Mac& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

metadata::Mac FrameSigner::tag(metadata::FrameType type, std::span<const uint8_t> payload) {
  uint8_t head[11];
  head[0] = dir_;
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(seq_ >> (8 * i));
  const auto t = static_cast<uint16_t>(type);
  head[9] = static_cast<uint8_t>(t);
  head[10] = static_cast<uint8_t>(t >> 8);
  ++seq_;
  std::vector<uint8_t> data(head, head + sizeof head);
  data.insert(data.end(), payload.begin(), payload.end());
  metadata::Mac out = hmac(key_, data);
  return out;
}

}  // namespace tent::control
