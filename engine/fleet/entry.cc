#include "fleet/entry.h"

#include <cstring>

namespace tent::fleet {

namespace {

constexpr std::string_view kMagic = "TENTSEG1";
constexpr std::string_view kTagLabel = "tent-fleet-entry";
constexpr size_t kMaxAddress = 300;
constexpr size_t kMaxDescriptor = 16u << 20;

void putInt(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool takeInt(std::string_view* in, int bytes, uint64_t* v) {
  if (in->size() < size_t(bytes)) return false;
  *v = 0;
  for (int i = 0; i < bytes; ++i) *v |= uint64_t(uint8_t((*in)[i])) << (8 * i);
  in->remove_prefix(bytes);
  return true;
}

metadata::Mac tagOf(std::string_view name, std::string_view body, const control::Secret& s) {
  std::string data;
  putInt(&data, name.size(), 2);
  data += name;
  data += body;
  return s.tag(kTagLabel, {reinterpret_cast<const uint8_t*>(data.data()), data.size()});
}

}  // namespace

std::string encodeEntry(const Entry& e, const control::Secret& secret) {
  std::string out(kMagic);
  putInt(&out, e.instance, 8);
  putInt(&out, e.address.size(), 2);
  out += e.address;
  putInt(&out, e.descriptor.size(), 4);
  out.append(reinterpret_cast<const char*>(e.descriptor.data()), e.descriptor.size());
  out.push_back(secret.empty() ? 0 : 1);
  if (!secret.empty()) {
    const metadata::Mac tag = tagOf(e.name, out, secret);
    out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  }
  return out;
}

Result<Entry> decodeEntry(std::string_view name, std::string_view bytes,
                          const control::Secret& secret) {
  const std::string_view all = bytes;
  auto bad = [&](const char* what) {
    return Status::InvalidArgument("fleet entry of '" + std::string(name) + "': " + what);
  };
  if (bytes.substr(0, kMagic.size()) != kMagic) return bad("not a tent entry");
  bytes.remove_prefix(kMagic.size());
  Entry e;
  e.name = std::string(name);
  uint64_t len = 0;
  if (!takeInt(&bytes, 8, &e.instance) || !takeInt(&bytes, 2, &len)) return bad("truncated");
  if (len > kMaxAddress || bytes.size() < len) return bad("bad address");
  e.address = std::string(bytes.substr(0, len));
  bytes.remove_prefix(len);
  if (!takeInt(&bytes, 4, &len) || len > kMaxDescriptor || bytes.size() < len)
    return bad("bad descriptor length");
  e.descriptor.assign(bytes.begin(), bytes.begin() + len);
  bytes.remove_prefix(len);
  uint64_t flag = 0;
  if (!takeInt(&bytes, 1, &flag) || flag > 1) return bad("bad signature flag");
  e.is_signed = flag == 1;
  const size_t body_len = all.size() - bytes.size();
  if (e.is_signed ? bytes.size() != sizeof(metadata::Mac) : !bytes.empty())
    return bad("trailing bytes");
  if (secret.empty()) return e;  // no cluster secret: nothing to check against
  if (!e.is_signed)
    return Status::PermissionDenied("fleet entry of '" + std::string(name) +
                                    "' is not signed, and bootstrap.auth is configured");
  metadata::Mac got{};
  std::memcpy(got.data(), bytes.data(), got.size());
  if (!control::equalMacs(got, tagOf(name, all.substr(0, body_len), secret)))
    return Status::PermissionDenied("fleet entry of '" + std::string(name) +
                                    "' has a wrong signature (not written with the cluster "
                                    "secret)");
  return e;
}

std::string encodeBlob(const Entry& e, const control::Secret& secret) {
  std::string out;
  putInt(&out, e.name.size(), 2);
  out += e.name;
  return out + encodeEntry(e, secret);
}

Result<Entry> decodeBlob(std::string_view bytes, const control::Secret& secret) {
  uint64_t len = 0;
  if (!takeInt(&bytes, 2, &len) || len == 0 || len > 255 || bytes.size() < len)
    return Status::InvalidArgument("metadata blob: bad name");
  const std::string_view name = bytes.substr(0, len);
  bytes.remove_prefix(len);
  return decodeEntry(name, bytes, secret);
}

}  // namespace tent::fleet
