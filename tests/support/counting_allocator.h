// A test program's replacement of the global operator new/delete that counts the
// allocations made on the calling thread while a CountAllocations is alive. Include
// it from exactly one translation unit of a test program (it defines the operators).
// Per thread, so the engine's control thread or a test's helpers are not counted.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tent::testing {

inline thread_local bool t_counting_allocations = false;
inline thread_local size_t t_allocations = 0;

// Counts this thread's operator new calls from construction to count().
class CountAllocations {
 public:
  CountAllocations() {
    t_allocations = 0;
    t_counting_allocations = true;
  }
  ~CountAllocations() { t_counting_allocations = false; }
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  size_t count() const noexcept { return t_allocations; }
};

inline void* countedMalloc(std::size_t size) noexcept {
  if (t_counting_allocations) ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}

}  // namespace tent::testing

// These replacements pair malloc with free on purpose; GCC cannot see that.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
  if (void* p = tent::testing::countedMalloc(size)) return p;
  throw std::bad_alloc();
}
// std::stable_sort and friends use the nothrow forms: they must pair with our delete.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return tent::testing::countedMalloc(size);
}
void* operator new[](std::size_t size) {
  return ::operator new(size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return ::operator new(size, tag);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
