// cvest tune's wait for an idle device (io/os/DeviceIdle.hpp), which every other
// test skips (CVEST_TUNE_NO_WAIT): the busy time read from /proc/diskstats
// lines as kernels from 2.6.25 to 6.x write them (tests/io/os/diskstats.txt:
// this VM's lines, a pre-4.18 disk of 11 counters, an old partition of 4),
// and the wait returning after half a second steady, not before it and not
// while the time still moves (its readings counted).
#include "io/os/DeviceIdle.hpp"
#include "tests/io/Scratch.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

using namespace cvest::io;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A device whose busy time reads `values` in turn, the last again once
// they run out; how many times it was read.
struct Device {
  std::vector<long> values;
  int reads = 0;
  long operator()() { return values[std::min(std::size_t(reads++), values.size() - 1)]; }
};

}  // namespace

TEST_CASE("the busy time is each device's tenth counter in /proc/diskstats", "[io][tune]") {
  CHECK(busy_ms("254:0", CVEST_TEST_DISKSTATS) == 292608);  // 17 counters (Linux 5.5 on)
  CHECK(busy_ms("254:1", CVEST_TEST_DISKSTATS) == 291000);  // a partition, as its disk
  CHECK(busy_ms("259:0", CVEST_TEST_DISKSTATS) == 41337);
  CHECK(busy_ms("25:40", CVEST_TEST_DISKSTATS) == 77777);
  CHECK(busy_ms("8:0", CVEST_TEST_DISKSTATS) == 1234);  // 11 counters (before Linux 4.18)
  CHECK(busy_ms("7:0", CVEST_TEST_DISKSTATS) == 0);     // listed, never busy
  CHECK(busy_ms("8:1", CVEST_TEST_DISKSTATS) == -1);    // 4 counters: no busy time
  CHECK(busy_ms("9:9", CVEST_TEST_DISKSTATS) == -1);    // not listed
  CHECK(busy_ms("254:0", scratch("no-diskstats").string()) == -1);
}

TEST_CASE("the idle wait returns after half a second steady, not while the busy time moves", "[io][tune]") {
  const auto start = std::chrono::steady_clock::now();
  // This VM's disk in the fixture, steady: read, half a second, read again.
  int reads = 0;
  wait_until_steady([&] { return ++reads, busy_ms("254:0", CVEST_TEST_DISKSTATS); });
  CHECK(reads == 2);
  // Moving twice, then steady: four reads, a half second between each.
  Device moving{{292608, 292700, 292900, 292900, 293000}};
  const auto moved = std::chrono::steady_clock::now();
  wait_until_steady([&] { return moving(); });
  CHECK(moving.reads == 4);
  CHECK(seconds_since(moved) >= 1.45);
  // No such device: one read, then a pause of half a second.
  Device none{{busy_ms("9:9", CVEST_TEST_DISKSTATS)}};
  const auto paused = std::chrono::steady_clock::now();
  wait_until_steady([&] { return none(); });
  CHECK(none.reads == 1);
  CHECK(seconds_since(paused) >= 0.45);
  CHECK(seconds_since(start) < 10.0);  // never its 30 s limit
}
