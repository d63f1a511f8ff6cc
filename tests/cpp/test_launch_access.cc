// The host-side launch choices shared by every GPU launcher (gpu/common/access.h) that read the
// environment, as plain functions of its value (no GPU needed): FUSEKIT_MAX_CLUSTER_BLOCKS.
#include "gpu/common/access.h"

#include "gtest/gtest.h"

namespace fusekit::gpu {
namespace {

TEST(ClusterBlocksLimit, UnsetOrUnreadableKeepsTheDevicesLimit) {
  for (int device_max : {1, 8, 16}) {
    EXPECT_EQ(cluster_blocks_limit(nullptr, device_max), device_max);
    for (const char* value : {"", "0", "00", "-8", "+8", "8 ", " 8", "8x", "eight", "0x8", "1e1"}) {
      EXPECT_EQ(cluster_blocks_limit(value, device_max), device_max) << "'" << value << "'";
    }
  }
}

TEST(ClusterBlocksLimit, CapsAtAPowerOfTwoNoLargerThanTheDevice) {
  struct Case {
    const char* value;
    int device_max;
    int limit;
  };
  const Case cases[] = {
      {"1", 16, 1},  {"2", 16, 2},   {"3", 16, 2},   {"7", 16, 4},  {"8", 16, 8},
      {"08", 16, 8}, {"15", 16, 8},  {"16", 16, 16}, {"17", 16, 16}, {"1000", 16, 16},
      {"99999999999999999999", 16, 16},  // past any integer type: still the device's limit
      {"8", 1, 1},   {"16", 8, 8},   {"4", 8, 4},    {"1", 1, 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(cluster_blocks_limit(c.value, c.device_max), c.limit)
        << "'" << c.value << "' on a device of " << c.device_max;
  }
}

}  // namespace
}  // namespace fusekit::gpu
