#include <gtest/gtest.h>
#include "carb/space.hpp"
TEST(Smoke, Builds) { EXPECT_EQ(carb::element_bytes(carb::Precision::kFp16), 2); }
