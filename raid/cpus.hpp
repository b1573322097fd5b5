// How many CPUs this process may run on: its affinity mask (taskset, cgroup cpusets), which
// std::thread::hardware_concurrency() ignores, or that when the mask cannot be read. What
// sizes thread pools and decides whether spinning can pay (a spin on the only CPU keeps
// the thread it waits for from running).
#pragma once

#include <sched.h>

#include <algorithm>
#include <thread>

namespace stripefs {

inline unsigned usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  return static_cast<unsigned>(CPU_COUNT(&set));
}

}  // namespace stripefs
