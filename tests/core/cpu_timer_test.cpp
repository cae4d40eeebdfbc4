#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "core/cpu_timer.h"

using namespace deepinfer;

TEST(CpuTimer, SectionsAccumulateIntoTheReport) {
  setenv("DEEPINFER_CPU_TIMER", "1", 1);  // read once, at the first enabled() call
  ASSERT_TRUE(CpuTimers::enabled());
  CpuTimers::reset();
  for (int i = 0; i < 3; ++i) {
    ScopedCpuTimer t("schedule");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  { ScopedCpuTimer t("forward"); }
  const std::string r = CpuTimers::report();
  EXPECT_NE(r.find("schedule"), std::string::npos) << r;
  EXPECT_NE(r.find("forward"), std::string::npos) << r;
  // "schedule" ran 3 times for >= 6 ms in all.
  const auto line =
      r.substr(r.find("schedule"), r.find('\n', r.find("schedule")) - r.find("schedule"));
  EXPECT_NE(line.find(" 3 "), std::string::npos) << line;
  // Largest total first, its share 100% of itself; a name past the column keeps the table
  // aligned.
  EXPECT_LT(r.find("schedule"), r.find("forward")) << r;
  EXPECT_NE(line.find("100.0%"), std::string::npos) << line;
  { ScopedCpuTimer t("a section name longer than the first column"); }
  const std::string wide = CpuTimers::report();
  // The calls column is right-aligned: its header and this row's count end at one column.
  const size_t header_end = wide.find("calls") + 5;
  const size_t row = wide.find("a section name longer");
  ASSERT_NE(row, std::string::npos) << wide;
  EXPECT_EQ(wide.find(" 1 ", row) + 2 - row, header_end) << wide;
  CpuTimers::reset();
  EXPECT_EQ(CpuTimers::report(), "");
}
