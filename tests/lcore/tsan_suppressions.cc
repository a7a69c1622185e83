// ThreadSanitizer suppressions for the lcore tests (used only in -Dsanitizer=thread
// builds). Debian's DPDK builds rte_ring with the x86 "generic" memory model: its
// ordering comes from x86 TSO plus compiler barriers (rte_smp_rmb/wmb), which
// TSan cannot see, so every cross-thread ring hand-off looks like a race; the RTS
// producer path reads the tail position without an atomic load on purpose. The
// ring's ordering is DPDK's to prove; our own synchronisation stays checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:rte_ring_elem_pvt.h\n"
         "race:rte_ring_generic_pvt.h\n"
         "race:rte_ring_rts_elem_pvt.h\n"
         "race:rte_wait_until_equal_32\n";
}
