// The soft NIC's payload copy (soft_copy.h). Datapath: no allocation, no syscall.
#include <cstring>

#include "fabric/soft/soft_copy.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace tent::fabric::soft {

namespace {

// As integers: the two ranges usually lie in different objects (or processes' mappings).
bool disjoint(const uint8_t* a, const uint8_t* b, size_t n) noexcept {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x + n <= y || y + n <= x;
}

#if defined(__x86_64__)
// SSE2 (every x86-64): the copy is bound by memory, not by the vector width.
void streamCopy(uint8_t* d, const uint8_t* s, size_t n) noexcept {
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > n) head = n;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  // Non-temporal stores are weakly ordered: without the fence a completion's release
  // store could be seen before the last bytes.
  _mm_sfence();
  std::memcpy(d + body, s + body, n - body);
}
#endif

}  // namespace

void dmaCopy(void* dst, const void* src, size_t n, uint64_t stream_min) noexcept {
  // A zero-length SGE may carry a null address (verbs allows it); memmove may not.
  if (n == 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
#if defined(__x86_64__)
  if (stream_min != 0 && n >= stream_min && disjoint(d, s, n)) {
    streamCopy(d, s, n);
    return;
  }
#else
  (void)disjoint;
  (void)stream_min;
#endif
  std::memmove(d, s, n);
}

}  // namespace tent::fabric::soft
