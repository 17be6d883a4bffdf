#include "core/FlatRun.hpp"

#include "core/Plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace cvest::policy {

namespace {

std::size_t parse_size(const std::string& text) {  // "1024K", "1M", "1048576"
  std::size_t value = 0, at = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9') value = value * 10 + std::size_t(text[at++] - '0');
  if (at < text.size() && (text[at] == 'K' || text[at] == 'k')) value <<= 10;
  if (at < text.size() && (text[at] == 'M' || text[at] == 'm')) value <<= 20;
  return value;
}

// A cache level's size on the core this process starts on: sysconf, else sysfs.
std::pair<std::size_t, std::string> cache_level(int wanted) {
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (const long size = ::sysconf(wanted == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE); size > 0)
    return {std::size_t(size), "sysconf"};
#endif
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int l = 0;
    std::string s;
    if (level >> l && l == wanted && size >> s && parse_size(s) > 0) return {parse_size(s), "sysfs"};
  }
  return {0, ""};
}

FlatRun measure() {
  FlatRun run;
  run.l3_bytes = cache_level(3).first;
  if (const char* walk = std::getenv("CVEST_FLAT_WALK"); walk && (std::string(walk) == "storage" || std::string(walk) == "dates"))
    run.walk_forced = walk;
  if (const char* forced = std::getenv("CVEST_FLAT_RUN"); forced && *forced) {
    run.bytes = parse_bytes(forced);
    run.source = "CVEST_FLAT_RUN";
    return run;
  }
  const auto [l2, source] = cache_level(2);
  run.l2_bytes = l2;
  run.source = l2 ? source : "L2 size not readable: a stated default of 1 MiB assumed";
  run.bytes = std::clamp<std::size_t>((l2 ? l2 : std::size_t(1) << 20) / 8, std::size_t(64) << 10,
                                      std::size_t(1) << 20);
  return run;
}

}  // namespace

const FlatRun& flat_run() {
  static const FlatRun run = measure();
  return run;
}

bool flat_walks_storage_order(std::size_t slice_bytes) {
  const FlatRun& r = flat_run();
  if (!r.walk_forced.empty()) return r.walk_forced == "storage";
  return r.l3_bytes > 0 && slice_bytes <= r.l3_bytes / 2;
}

namespace {

std::string walk_text() {
  const FlatRun& r = flat_run();
  if (!r.walk_forced.empty()) return "; LayoutRight walks " + std::string(r.walk_forced == "storage" ? "in storage order" : "a run's dates in turn") + " (CVEST_FLAT_WALK)";
  if (r.l3_bytes == 0) return "; LayoutRight walks a run's dates in turn (L3 size not readable: the stated default)";
  return fmt::format("; LayoutRight walks in storage order where multBy fits half the {} MiB L3, else a run's dates in turn",
                     r.l3_bytes >> 20);
}

std::string run_text(std::size_t element_size) {
  const FlatRun& r = flat_run();
  const std::string type = element_size == 8 ? "double" : element_size == 4 ? "float" : "element";
  if (r.source == "CVEST_FLAT_RUN")
    return fmt::format("{} elements of {} ({} KiB, CVEST_FLAT_RUN)", flat_run_elements(element_size), type,
                       r.bytes >> 10);
  if (r.l2_bytes == 0)
    return fmt::format("{} elements of {} ({} KiB; {})", flat_run_elements(element_size), type, r.bytes >> 10,
                       r.source);
  const bool clamped = r.bytes != r.l2_bytes / 8;
  return fmt::format("{} elements of {} ({} KiB: {} the {} KiB L2, {})", flat_run_elements(element_size), type,
                     r.bytes >> 10, clamped ? "within 64 KiB-1 MiB, for" : "an eighth of", r.l2_bytes >> 10, r.source);
}

}  // namespace

std::string flat_run_text(std::size_t element_size) { return run_text(element_size) + walk_text(); }

}  // namespace cvest::policy
