// The pause of a spin-wait loop: tells the core (and an SMT sibling) that we spin.
#pragma once

namespace tent {

inline void cpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace tent
