#include "core/FlatRun.hpp"

#include "core/Plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace cvest::policy {

namespace {

FlatRun measure() {
  FlatRun run;
  const Topology& topology = machine_topology();
  run.l2_share = topology.l2.share();
  if (const char* tile = std::getenv("CVEST_FLAT_TILE"); tile && *tile) run.tile_forced = parse_bytes(tile);
  if (const char* walk = std::getenv("CVEST_FLAT_WALK"); walk && (std::string(walk) == "storage" || std::string(walk) == "dates"))
    run.walk_forced = walk;
  if (const char* forced = std::getenv("CVEST_FLAT_RUN"); forced && *forced) {
    run.bytes = parse_bytes(forced);
    run.source = "CVEST_FLAT_RUN";
    return run;
  }
  const std::size_t l2 = run.l2_share;
  run.l2_bytes = l2;
  run.source = l2 ? topology.source : "L2 size not readable: a stated default of 1 MiB assumed";
  run.bytes = std::clamp<std::size_t>((l2 ? l2 : std::size_t(1) << 20) / 8, std::size_t(64) << 10,
                                      std::size_t(1) << 20);
  return run;
}

}  // namespace

const FlatRun& flat_run() {
  static const FlatRun run = measure();
  return run;
}

std::size_t flat_tile_bytes(std::size_t slice_bytes, std::size_t element_size) {
  const FlatRun& r = flat_run();
  const std::size_t run = std::size_t(flat_run_elements(element_size)) * element_size;
  std::size_t tile = r.l2_share ? r.l2_share : std::size_t(1) << 20;  // the stated default, as for the runs
  if (r.tile_forced > 0) tile = r.tile_forced;
  if (r.walk_forced == "storage") tile = slice_bytes;
  if (r.walk_forced == "dates") tile = run;
  tile = std::max(run, std::min(tile, slice_bytes));
  // Tiles of one size: as few as that size allows, evened out (a last tile
  // almost empty would leave threads' shares of the chunks uneven).
  const std::size_t tiles = (slice_bytes + tile - 1) / tile;
  tile = tiles > 0 ? (slice_bytes + tiles - 1) / tiles : tile;
  return std::max(run, (tile + run - 1) / run * run);  // whole runs, one at least
}

namespace {

std::string walk_text() {
  const FlatRun& r = flat_run();
  if (!r.walk_forced.empty())
    return "; LayoutRight walks " + std::string(r.walk_forced == "storage" ? "in storage order" : "a run's dates in turn") +
           " (CVEST_FLAT_WALK)";
  if (r.tile_forced > 0)
    return fmt::format("; LayoutRight: tiles of multBy of up to {} KiB (CVEST_FLAT_TILE) walked date by date, storage "
                       "order where one holds all of multBy", r.tile_forced >> 10);
  if (r.l2_share == 0)
    return "; LayoutRight: tiles of multBy of up to 1024 KiB (L2 size not readable: the stated default) walked date by "
           "date, storage order where one holds all of multBy";
  return fmt::format("; LayoutRight: tiles of multBy of up to {} KiB (a thread's share of the L2) walked date by date, "
                     "storage order where one holds all of multBy", r.l2_share >> 10);
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
  return fmt::format("{} elements of {} ({} KiB: {} a thread's {} KiB of L2, {})", flat_run_elements(element_size),
                     type, r.bytes >> 10, clamped ? "within 64 KiB-1 MiB, for" : "an eighth of", r.l2_bytes >> 10,
                     r.source);
}

}  // namespace

std::string flat_run_text(std::size_t element_size) { return run_text(element_size) + walk_text(); }

}  // namespace cvest::policy
