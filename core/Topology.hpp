#pragma once
// The caches of the CPUs this process runs on, as the machine describes them
// (Linux's sysfs: each CPU's cache entries with level, type, size and the
// CPUs sharing it), so a thread's share of its L2 and L3 is known. Inside a
// VM, sysconf can report the host's whole L3 (384 MiB on a 2-core AMD VM
// whose sysfs says 32 MiB shared by its CPUs 0-1): sysconf is used only where
// sysfs is absent, and every figure says where it came from. Every
// cache-based choice (flat's run length and walk, core/FlatRun.hpp) reads it.
#include <cstddef>
#include <string>
#include <vector>

namespace cvest::policy {

struct CacheLevel {
  std::size_t bytes = 0;  // one cache's size (the smallest where they differ); 0: unknown
  int sharing = 1;        // of this process's CPUs, the most that share one such cache
  int instances = 0;      // how many such caches this process's CPUs use
  // A thread's share, one thread per CPU: bytes / sharing.
  std::size_t share() const { return sharing > 0 ? bytes / std::size_t(sharing) : bytes; }
};

struct Topology {
  std::vector<int> cpus;  // the CPUs this process may run on
  CacheLevel l2, l3;      // data or unified caches
  std::string source;     // "sysfs", "sysconf" (no sysfs), or "none"
};

// From the sysfs tree at `root` (cpuN/cache/indexI/{level,type,size,
// shared_cpu_list}) for `cpus`; sysconf where no CPU there has cache entries
// (and `use_sysconf`). Tests pass fixture trees.
Topology read_topology(const std::string& root, const std::vector<int>& cpus, bool use_sysconf = true);
// The CPUs this process may run on (sched_getaffinity; 0..n-1 where unknown).
std::vector<int> affinity_cpus();
// Read once per process from /sys/devices/system/cpu, for the CPUs the
// OpenMP threads run on (its places; else the process's affinity).
const Topology& machine_topology();

// "L2 1024 KiB per CPU; L3 32 MiB shared by 2 CPUs (16 MiB a thread); sysfs"
std::string topology_text(const Topology& topology);

// "0-3,8-11" -> {0, 1, 2, 3, 8, 9, 10, 11}; empty where malformed.
std::vector<int> parse_cpu_list(const std::string& text);

}  // namespace cvest::policy
