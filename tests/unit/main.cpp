// Unit-test entry point: the libraries' loggers are silent unless STRIPEFS_TEST_LOG is set
// (failure tests provoke error logs on purpose).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(std::getenv("STRIPEFS_TEST_LOG") ? spdlog::level::debug : spdlog::level::off);
  return RUN_ALL_TESTS();
}
