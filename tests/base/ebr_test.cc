// Epoch-based reclamation: a writer's epoch is quiescent only once every reader that
// was inside a section when it retired has left, whatever else readers do.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/ebr.h"

namespace tent::ebr {
namespace {

TEST(Ebr, QuiescentOnceTheReadersOfTheEpochLeft) {
  const uint64_t e0 = retire();
  EXPECT_TRUE(quiescentSince(e0));  // no reader
  std::atomic<int> phase{0};
  std::thread reader([&] {
    ReadSection s;
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
  });
  while (phase.load() != 1) std::this_thread::yield();
  const uint64_t e1 = retire();
  EXPECT_FALSE(quiescentSince(e1));  // the reader entered before the retire
  EXPECT_EQ(activeReaders(), 1u);
  phase = 2;
  reader.join();
  EXPECT_TRUE(quiescentSince(e1));
}

TEST(Ebr, AReaderThatEntersAfterTheRetireDoesNotHoldIt) {
  const uint64_t e = retire();
  ReadSection s;  // entered at an epoch >= e: it cannot have seen what was retired
  EXPECT_TRUE(quiescentSince(e));
  const uint64_t later = retire();
  EXPECT_FALSE(quiescentSince(later));
}

TEST(Ebr, SectionsNestAndThreadsReleaseTheirSlots) {
  {
    ReadSection a;
    ReadSection b;
    EXPECT_EQ(activeReaders(), 1u);
  }
  EXPECT_EQ(activeReaders(), 0u);
  for (int i = 0; i < 3000; ++i) {  // more threads than slots, one after another
    std::thread t([] { ReadSection s; });
    t.join();
  }
  const uint64_t e = retire();
  EXPECT_TRUE(quiescentSince(e));
}

}  // namespace
}  // namespace tent::ebr
