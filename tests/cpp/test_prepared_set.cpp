// PreparedSet: an Accelerator's lookup from a prepared object to its wrapper.
#include <gtest/gtest.h>

#include <new>

#include "accelerator/prepared_set.h"

TEST(PreparedSet, AnObjectBornWhereAFreedOneLivedIsNotTakenForIt) {
  // Both objects live in the same cell, as an allocator that reuses memory at once would place them.
  alignas(int) static unsigned char cell[sizeof(int)];
  auto no_delete = [](int*) {};
  acc::PreparedSet<int> set;
  auto wrapper = std::make_shared<int>(10);
  std::shared_ptr<const void> first(new (cell) int(1), no_delete);
  set.add(first, wrapper);
  EXPECT_EQ(set.find(first), wrapper);
  first.reset();
  std::shared_ptr<const void> second(new (cell) int(2), no_delete);
  EXPECT_EQ(set.find(second), nullptr);  // the freed object's wrapper is not this one's
  EXPECT_TRUE(set.holds(wrapper.get()));
}

TEST(PreparedSet, AWrapperTheProgramDroppedIsForgotten) {
  acc::PreparedSet<int> set;
  auto original = std::make_shared<int>(1);
  auto wrapper = std::make_shared<int>(2);
  set.add(original, wrapper);
  wrapper.reset();
  EXPECT_EQ(set.find(original), nullptr);
  EXPECT_TRUE(set.live().empty());
}
