// Epoch-based reclamation: how the control plane frees an object (an endpoint, a
// segment record) that datapath threads may still hold a raw pointer to.
//
// Readers - lcore pollers for one pass, caller threads for one submit or status
// call - wrap their accesses in a ReadSection: it publishes the global epoch in the
// thread's slot (a store and a fence) and clears it on exit. Readers never wait and
// never allocate. A writer unlinks the object first (no new reader can find it),
// then calls retire(), which advances the epoch; once quiescentSince(that epoch)
// holds, no reader can still hold the pointer and the object may be freed.
//
// Process-wide: one epoch and one slot table serve every engine, so a thread that
// uses two engines has one slot. Slots are claimed on a thread's first section (a
// scan of a static array, no allocation) and released when the thread exits.
#pragma once

#include <cstdint>

namespace tent::ebr {

class ReadSection {
 public:
  ReadSection() noexcept;
  ~ReadSection();
  ReadSection(const ReadSection&) = delete;
  ReadSection& operator=(const ReadSection&) = delete;
};

// Advances the epoch; returns the epoch every reader active now must leave behind.
uint64_t retire() noexcept;
// True once every reader that could have seen an object retired at `epoch` has left
// its section. Control path; cost is a scan of the claimed slots.
bool quiescentSince(uint64_t epoch) noexcept;

// For tests and stats: readers inside a section now.
unsigned activeReaders() noexcept;

}  // namespace tent::ebr
