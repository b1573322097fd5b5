// Mounted-test entry point.
#include <gtest/gtest.h>

#include <sys/stat.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Tests compare the modes of new files with what they asked for; fix the mask they pass.
  umask(022);
  return RUN_ALL_TESTS();
}
