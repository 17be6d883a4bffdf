// Machine facts from the machine (core/Topology.hpp): the sysfs trees of real
// layouts (tests/core/topology/*.txt, materialized in a scratch folder) read
// into each level's size and how many of the process's CPUs share one, for
// all CPUs and for a subset (a cpuset, taskset); no sysfs at all: sysconf, or
// nothing, said; and the flat walk's tile derived from the L2 share.
#include "core/FlatRun.hpp"
#include "core/Topology.hpp"

#include "tests/ProcessScratch.hpp"
#include "tests/Skip.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace cvest::policy;
namespace fs = std::filesystem;

namespace {

// A sysfs cpu tree from a fixture's lines "cpu index level type size shared_cpu_list".
fs::path materialize(const std::string& fixture) {
  const fs::path root = cvest::test::process_scratch() / "topology" / fixture;
  fs::remove_all(root);
  std::ifstream in(fs::path(CVEST_TEST_TOPOLOGY_DIR) / (fixture + ".txt"));
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string cpu, index, level, type, size, shared;
    REQUIRE(fields >> cpu >> index >> level >> type >> size >> shared);
    const fs::path dir = root / ("cpu" + cpu) / "cache" / ("index" + index);
    fs::create_directories(dir);
    for (const auto& [name, value] : {std::pair{"level", level}, {"type", type}, {"size", size}, {"shared_cpu_list", shared}})
      std::ofstream(dir / name) << value << "\n";
  }
  return root;
}

std::vector<int> range(int first, int last) {
  std::vector<int> v;
  for (int c = first; c <= last; ++c) v.push_back(c);
  return v;
}

}  // namespace

TEST_CASE("cpu lists parse as the kernel writes them", "[topology]") {
  CHECK(parse_cpu_list("0-3,8-11") == std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(parse_cpu_list("5") == std::vector<int>{5});
  CHECK(parse_cpu_list("0,8") == std::vector<int>{0, 8});
  CHECK(parse_cpu_list("3-1").empty());
  CHECK(parse_cpu_list("x").empty());
}

TEST_CASE("a 2-CPU VM: its L3 shared by both, not the host's sysconf figure", "[topology]") {
  const Topology t = read_topology(materialize("vm_2cpu_amd").string(), {0, 1}, false);
  CHECK(t.source == "sysfs");
  CHECK(t.l2.bytes == (std::size_t(1) << 20));
  CHECK(t.l2.sharing == 1);
  CHECK(t.l2.instances == 2);
  CHECK(t.l3.bytes == (std::size_t(32) << 20));
  CHECK(t.l3.sharing == 2);
  CHECK(t.l3.instances == 1);
  CHECK(t.l3.share() == (std::size_t(16) << 20));
  CHECK(topology_text(t) == "L2 1 MiB per CPU; L3 32 MiB shared by 2 CPUs (16 MiB a thread); 2 CPUs; sysfs");
  // Pinned to one CPU (taskset): that thread has the L3 to itself.
  const Topology one = read_topology(materialize("vm_2cpu_amd").string(), {1}, false);
  CHECK(one.l3.sharing == 1);
  CHECK(one.l3.share() == (std::size_t(32) << 20));
}

TEST_CASE("an EPYC with SMT and one L3 per CCX", "[topology]") {
  const std::string root = materialize("epyc_two_ccx_smt").string();
  const Topology all = read_topology(root, range(0, 15), false);
  CHECK(all.l2.bytes == (std::size_t(512) << 10));
  CHECK(all.l2.sharing == 2);  // SMT siblings
  CHECK(all.l2.instances == 8);
  CHECK(all.l2.share() == (std::size_t(256) << 10));
  CHECK(all.l3.bytes == (std::size_t(32) << 20));
  CHECK(all.l3.sharing == 8);
  CHECK(all.l3.instances == 2);
  CHECK(all.l3.share() == (std::size_t(4) << 20));
  // One thread per core (CPUs 0-7): no SMT sibling shares a core's L2.
  const Topology cores = read_topology(root, range(0, 7), false);
  CHECK(cores.l2.sharing == 1);
  CHECK(cores.l3.sharing == 4);
  CHECK(cores.l3.instances == 2);
  // One CCX only (a cpuset of CPUs 0-3 and their siblings).
  const Topology ccx = read_topology(root, {0, 1, 2, 3, 8, 9, 10, 11}, false);
  CHECK(ccx.l3.instances == 1);
  CHECK(ccx.l3.sharing == 8);
}

TEST_CASE("a VM that reports one L3 for all its CPUs", "[topology]") {
  const Topology t = read_topology(materialize("vm_one_l3").string(), range(0, 7), false);
  CHECK(t.l2.bytes == (std::size_t(2) << 20));
  CHECK(t.l2.sharing == 1);
  CHECK(t.l3.bytes == (std::size_t(64) << 20));
  CHECK(t.l3.sharing == 8);
  CHECK(t.l3.share() == (std::size_t(8) << 20));
}

TEST_CASE("no sysfs: sysconf where it knows, else nothing, and said", "[topology]") {
  const fs::path empty = cvest::test::process_scratch() / "topology" / "none";
  fs::create_directories(empty);
  const Topology without = read_topology(empty.string(), {0, 1}, false);
  CHECK(without.source == "none");
  CHECK(without.l2.bytes == 0);
  CHECK(without.l3.bytes == 0);
  CHECK(topology_text(without).find("cache sizes not readable") != std::string::npos);
  const Topology fallback = read_topology(empty.string(), {0, 1}, true);
  CHECK((fallback.source == "sysconf" || fallback.source == "none"));
  if (fallback.source == "sysconf" && fallback.l3.bytes > 0) {
    CHECK(fallback.l3.sharing == 2);  // taken as shared by all: the cautious share
    // the text does not claim an L3 sharing it could not read (the L2 is taken as a core's)
    CHECK(topology_text(fallback).find("which CPUs share it unknown") != std::string::npos);
    CHECK(topology_text(fallback).find("shared by") == std::string::npos);
  }
}

TEST_CASE("flat's tile: whole runs, at most the slice, at least one run", "[topology][flat]") {
  const std::size_t run = std::size_t(flat_run_elements(8)) * 8;
  const int dates = GENERATE(1, 2, 4);  // the most dates the walk takes at once
  CAPTURE(dates);
  CHECK(flat_tile_bytes(100, 8, dates) == run);  // a slice shorter than a run: one run
  const std::size_t big = std::size_t(4) << 30;
  const std::size_t tile = flat_tile_bytes(big, 8, dates);
  CHECK(tile % run == 0);
  CHECK(tile <= big);
  if (flat_run().walk_forced.empty() && flat_run().tile_forced == 0) {
    // the tile and the discount of the dates at once beside it within a
    // thread's share of the L2 (1 MiB where it cannot be read): whole runs,
    // one at least, evened out; more dates at once, no larger a tile
    const std::size_t share = flat_run().l2_share ? flat_run().l2_share : std::size_t(1) << 20,
                      most = std::max(run, share / std::size_t(dates + 1) / run * run);
    CHECK(flat_run().l2_assumed == share);
    CHECK(tile <= most);
    CHECK(tile >= most / 2);
    if (most > run) CHECK(tile * std::size_t(dates + 1) <= share);
    if (dates > 1) CHECK(tile <= flat_tile_bytes(big, 8, dates / 2));
    // A slice of 3.5 runs: as few tiles as `most` allows, of whole runs
    // (one tile of 4 runs where `most` holds 4, never a last tile of half a run).
    const std::size_t odd = run * 7 / 2, odd_tile = flat_tile_bytes(odd, 8, dates);
    CHECK(odd_tile % run == 0);
    CHECK((odd + odd_tile - 1) / odd_tile == (odd + most - 1) / most);
    CHECK((odd + odd_tile - 1) / odd_tile * odd_tile - odd < run);
  }
}

// The bench's and run's header says which tile rule and how many dates at
// once flat/right uses: two by default, four under CVEST_FLAT_DATES=4 (ctest
// unit.flat_four_dates), and the groups' text names the variable that set them.
TEST_CASE("flat's header text: the tile's share of the L2 and the dates at once", "[topology][flat]") {
  if (!flat_run().walk_forced.empty() || flat_run().tile_forced > 0)
    return cvest::test::skip_part("CVEST_FLAT_WALK or CVEST_FLAT_TILE sets the tiles");
  const std::string text = flat_run_text(8);
  CAPTURE(text);
  const int most = flat_dates_most();
  CHECK((most == 1 || most == 2 || most == 4));
  if (!flat_run().dates_forced) CHECK(most == 2);
  const std::string share = most == 1 ? "(a half of " : most == 2 ? "(a third of " : "(a fifth of ";
  CHECK(text.find("tiles of multBy of up to " + std::to_string(flat_tile_bytes(std::size_t(1) << 40, 8, most) >> 10) +
                  " KiB " + share) != std::string::npos);
  CHECK(text.find(most == 1 ? "beside the discount of one date at once) walked date by date, one at a time"
                            : "beside the discount of " + std::to_string(most) + " dates at once) walked date by date, up to " +
                                  std::to_string(most) + " dates at once where their rows allow") != std::string::npos);
  const std::string note = flat_run().dates_forced ? " (CVEST_FLAT_DATES=" + std::to_string(most) + ")" : "";
  CHECK(flat_dates_text(FlatDates{2, 1}) == "2 at once, 1 apart" + note);
  CHECK(flat_streams_text(FlatStreams{4, 7}) == "4 streams at once, 7 runs apart" + note);
}
