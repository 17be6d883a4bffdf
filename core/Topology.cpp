#include "core/Topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sched.h>
#include <set>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::policy {

namespace {

std::size_t parse_size(const std::string& text) {  // "1024K", "32M", "1048576"
  std::size_t value = 0, at = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9') value = value * 10 + std::size_t(text[at++] - '0');
  if (at < text.size() && (text[at] == 'K' || text[at] == 'k')) value <<= 10;
  if (at < text.size() && (text[at] == 'M' || text[at] == 'm')) value <<= 20;
  if (at < text.size() && (text[at] == 'G' || text[at] == 'g')) value <<= 30;
  return value;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Entry {
  int level = 0;
  std::size_t bytes = 0;
  std::vector<int> shared;
};

// Level 2 and 3 data/unified caches of `cpu`.
std::vector<Entry> caches_of(const std::string& root, int cpu) {
  std::vector<Entry> entries;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = root + "/cpu" + std::to_string(cpu) + "/cache/index" + std::to_string(index) + "/";
    const std::string level = first_line(dir + "level");
    if (level.empty()) continue;
    const std::string type = first_line(dir + "type");
    if (type == "Instruction") continue;
    Entry e;
    e.level = std::atoi(level.c_str());
    e.bytes = parse_size(first_line(dir + "size"));
    e.shared = parse_cpu_list(first_line(dir + "shared_cpu_list"));
    if (e.shared.empty()) e.shared = {cpu};
    if ((e.level == 2 || e.level == 3) && e.bytes > 0) entries.push_back(e);
  }
  return entries;
}

// One level over the process's CPUs: caches told apart by who shares them.
CacheLevel summarize(const std::vector<Entry>& entries, const std::set<int>& mine) {
  CacheLevel level;
  std::map<std::vector<int>, std::size_t> caches;  // shared CPU list -> size
  for (const Entry& e : entries) caches[e.shared] = e.bytes;
  for (const auto& [shared, bytes] : caches) {
    const int ours = int(std::count_if(shared.begin(), shared.end(), [&](int c) { return mine.count(c) > 0; }));
    level.bytes = level.bytes == 0 ? bytes : std::min(level.bytes, bytes);
    level.sharing = std::max(level.sharing, ours);
    ++level.instances;
  }
  return level;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    const std::size_t dash = part.find('-');
    char* rest = nullptr;
    const long first = std::strtol(part.c_str(), &rest, 10);
    if (rest == part.c_str() || first < 0) return {};
    long last = first;
    if (dash != std::string::npos) {
      last = std::strtol(part.c_str() + dash + 1, &rest, 10);
      if (last < first) return {};
    } else if (*rest != '\0' && *rest != '\n') {
      return {};
    }
    for (long c = first; c <= last; ++c) cpus.push_back(int(c));
    at = end + 1;
  }
  return cpus;
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty())
    for (long c = 0; c < std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)); ++c) cpus.push_back(int(c));
  return cpus;
}

Topology read_topology(const std::string& root, const std::vector<int>& cpus, bool use_sysconf) {
  Topology t;
  t.cpus = cpus;
  const std::set<int> mine(cpus.begin(), cpus.end());
  std::vector<Entry> l2, l3;
  for (const int cpu : cpus)
    for (const Entry& e : caches_of(root, cpu)) (e.level == 2 ? l2 : l3).push_back(e);
  if (!l2.empty() || !l3.empty()) {
    t.l2 = summarize(l2, mine);
    t.l3 = summarize(l3, mine);
    t.source = "sysfs";
    return t;
  }
  t.source = "none";
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (use_sysconf) {
    // No sharing to be read: the L2 taken as a core's, the L3 as shared by all.
    const long l2_bytes = ::sysconf(_SC_LEVEL2_CACHE_SIZE), l3_bytes = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l2_bytes > 0) t.l2 = {std::size_t(l2_bytes), 1, int(cpus.size())};
    if (l3_bytes > 0) t.l3 = {std::size_t(l3_bytes), int(cpus.size()), 1};
    if (l2_bytes > 0 || l3_bytes > 0) t.source = "sysconf";
  }
#endif
  return t;
}

namespace {
// The CPUs OpenMP's threads run on: its places, which it takes from the
// process's CPUs before binding the main thread to the first (OMP_PROC_BIND,
// which cvest sets; sched_getaffinity then says one CPU). Without places
// (binding off), the process's own CPUs.
std::vector<int> thread_cpus() {
#ifdef _OPENMP
  std::set<int> cpus;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    std::vector<int> ids(std::size_t(std::max(0, omp_get_place_num_procs(p))));
    omp_get_place_proc_ids(p, ids.data());
    cpus.insert(ids.begin(), ids.end());
  }
  if (!cpus.empty()) return {cpus.begin(), cpus.end()};
#endif
  return affinity_cpus();
}
}  // namespace

const Topology& machine_topology() {
  static const Topology topology = read_topology("/sys/devices/system/cpu", thread_cpus());
  return topology;
}

std::string topology_text(const Topology& t) {
  const auto size = [](std::size_t bytes) {
    return bytes >= (std::size_t(1) << 20) && bytes % (std::size_t(1) << 20) == 0 ? fmt::format("{} MiB", bytes >> 20)
                                                                                   : fmt::format("{} KiB", bytes >> 10);
  };
  const auto level = [&](const char* name, const CacheLevel& c, bool sharing_read) {
    if (c.bytes == 0) return fmt::format("{} unknown", name);
    if (!sharing_read)
      return fmt::format("{} {} (sysconf: which CPUs share it unknown; in a VM it can be the host's)", name,
                         size(c.bytes));
    if (c.sharing <= 1) return fmt::format("{} {} per CPU", name, size(c.bytes));
    return fmt::format("{} {} shared by {} CPUs ({} a thread)", name, size(c.bytes), c.sharing, size(c.share()));
  };
  // sysconf says nothing of sharing, and inside a VM its L3 can be the
  // host's (508 MiB on a 2-CPU Zen 5 VM with no sysfs cache entries); its
  // L2 is taken as a core's, as the run length assumes.
  const bool l3_sharing_read = t.source != "sysconf";
  return fmt::format("{}; {}; {} CPU{}; {}", level("L2", t.l2, true), level("L3", t.l3, l3_sharing_read),
                     t.cpus.size(), t.cpus.size() == 1 ? "" : "s",
                     t.source == "none" ? "cache sizes not readable" : t.source);
}

}  // namespace cvest::policy
