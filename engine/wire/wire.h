// Little-endian byte writer/reader for everything tent sends over its control
// connections. The reader never reads past its buffer: every getter reports
// failure instead, so parsers of network input can reject truncated messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tent::metadata {

class WireWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) { putLe(v, 2); }
  void u32(uint32_t v) { putLe(v, 4); }
  void u64(uint64_t v) { putLe(v, 8); }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  // u16 length + bytes.
  void str(std::string_view s) {
    u16(static_cast<uint16_t>(s.size()));
    raw(s.data(), s.size());
  }
  // Overwrites 4 bytes at `offset` (length fields written after the body).
  void patchU32(size_t offset, uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_[offset + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void putLe(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool u8(uint8_t* v) { return getLe(v, 1); }
  bool u16(uint16_t* v) { return getLe(v, 2); }
  bool u32(uint32_t* v) { return getLe(v, 4); }
  bool u64(uint64_t* v) { return getLe(v, 8); }
  bool raw(void* out, size_t n) {
    if (remaining() < n) return false;
    if (n != 0) std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool str(std::string* s, size_t max_len) {
    uint16_t n = 0;
    if (!u16(&n) || n > max_len || remaining() < n) return false;
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return size_ - pos_; }
  size_t position() const { return pos_; }
  const uint8_t* cursor() const { return data_ + pos_; }
  // Skips `n` bytes (the caller checked remaining()).
  void skip(size_t n) { pos_ += n < remaining() ? n : remaining(); }

 private:
  template <typename T>
  bool getLe(T* v, int n) {
    if (remaining() < static_cast<size_t>(n)) return false;
    uint64_t out = 0;
    for (int i = 0; i < n; ++i) out |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += n;
    *v = static_cast<T>(out);
    return true;
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace tent::metadata
