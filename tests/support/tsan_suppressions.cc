// ThreadSanitizer suppressions for engine tests (only used by -Dsanitizer=thread
// builds), the same as tests/lcore/tsan_suppressions.cc: Debian's DPDK rte_ring
// orders by x86 TSO and compiler barriers TSan cannot see. Only DPDK's ring
// internals are silenced; the engine's own synchronisation stays checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:rte_ring_elem_pvt.h\n"
         "race:rte_ring_generic_pvt.h\n"
         "race:rte_ring_rts_elem_pvt.h\n"
         "race:rte_wait_until_equal_32\n";
}
