// ThreadSanitizer suppressions for engine tests (only used by -Dsanitizer=thread
// builds), the same as tests/lcore/tsan_suppressions.cc: Debian's DPDK rte_ring
// orders by x86 TSO and compiler barriers TSan cannot see. Only DPDK's ring
// internals are silenced; the engine's own synchronisation stays checked. Debian's
// libtbb is not instrumented either: its task arena's start-up and join are invisible to
// TSan, so races inside TBB's own (header-inlined) scheduler code are silenced; the
// registration's results are ordered by an explicit atomic (host_registration.cc).
extern "C" const char* __tsan_default_suppressions() {
  return "race:rte_ring_elem_pvt.h\n"
         "race:rte_ring_generic_pvt.h\n"
         "race:rte_ring_rts_elem_pvt.h\n"
         "race:rte_wait_until_equal_32\n"
         "race:tbb::detail::d1::affinity_slot\n"
         "race:tbb::detail::d1::is_same_affinity\n"
         "race:libtbb.so\n";
}
