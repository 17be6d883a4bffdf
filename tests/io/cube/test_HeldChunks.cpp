// Decoded chunks held while the blocks that cut them run (io/cube/HeldChunks.*):
// each decoded once however threads interleave (the next one decoded ahead
// where there is room), within the capacity; a
// chunk a cut-short pass left behind dropped after the patience, and decoded
// again where needed; a failed decode reported, then tried again.
#include "io/cube/HeldChunks.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace cvest;
using namespace cvest::io;

namespace {
// A chunk's decoded bytes: its key's first number in every byte.
void decode_as(const HeldChunks::Key& key, unsigned char* into, std::size_t bytes) {
  std::memset(into, int(key[0] & 0xff), bytes);
}
}  // namespace

TEST_CASE("held chunks: each decoded once across threads, never more held than the capacity", "[io][held]") {
  constexpr int chunks = 12, pieces = 16, threads = 4;
  constexpr std::size_t bytes = 4096;
  const std::size_t capacity = GENERATE(1, 2, 3);
  CAPTURE(capacity);
  HeldChunks held(capacity, std::chrono::minutes(5));  // no patience needed: nothing is left behind
  std::vector<std::pair<HeldChunks::Key, std::uint64_t>> expected;
  for (Index c = 0; c < chunks; ++c) expected.push_back({{c, 0, 0}, pieces});
  held.begin_pass(expected);
  std::atomic<int> next{0}, wrong{0}, over{0};
  std::vector<std::atomic<int>> decodes(chunks);
  std::vector<std::thread> team;
  for (int w = 0; w < threads; ++w)
    team.emplace_back([&] {
      // The pieces in the pass's order, taken by whichever thread is free.
      for (int p; (p = next++) < chunks * pieces;) {
        const HeldChunks::Key key{p / pieces, 0, 0};
        held.use(
            key, bytes, 1, pieces,
            [&](const HeldChunks::Key& at, unsigned char* into) {  // `key`, or the next one decoded ahead
              ++decodes[std::size_t(at[0])];
              std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a decode takes a while
              decode_as(at, into, bytes);
            },
            [&](const unsigned char* data) {
              if (held.size() > capacity) ++over;
              for (std::size_t j = 0; j < bytes; ++j)
                if (data[j] != (key[0] & 0xff)) ++wrong;
            });
      }
    });
  for (auto& t : team) t.join();
  for (int c = 0; c < chunks; ++c) CHECK(decodes[std::size_t(c)] == 1);
  CHECK(wrong == 0);
  CHECK(over == 0);
  CHECK(held.size() == 0);  // every chunk let go once its pieces were copied
}

TEST_CASE("held chunks: what a cut-short pass left behind is dropped after the patience", "[io][held]") {
  HeldChunks held(1, std::chrono::milliseconds(50));
  held.begin_pass({{{0, 0, 0}, 2}, {{1, 0, 0}, 1}});
  int decodes = 0;
  const auto decode = [&](const HeldChunks::Key&) {
    return [&decodes](const HeldChunks::Key& at, unsigned char* into) {
      ++decodes;
      decode_as(at, into, 8);
    };
  };
  const auto nothing = [](const unsigned char*) {};
  held.use({0, 0, 0}, 8, 1, 2, decode({0, 0, 0}), nothing);  // one of its two pieces: held on
  const auto begin = std::chrono::steady_clock::now();
  held.use({1, 0, 0}, 8, 1, 1, decode({1, 0, 0}), nothing);  // waits, then drops chunk 0
  CHECK(std::chrono::steady_clock::now() - begin >= std::chrono::milliseconds(50));
  CHECK(decodes == 2);
  unsigned char seen = 0;
  held.use({0, 0, 0}, 8, 1, 2, decode({0, 0, 0}), [&](const unsigned char* data) { seen = data[0]; });
  CHECK(decodes == 3);  // decoded again
  CHECK(seen == 0);
  // A new pass drops what the last one held.
  held.begin_pass({});
  held.use({1, 0, 0}, 8, 1, 1, decode({1, 0, 0}), nothing);
  CHECK(decodes == 4);
}

TEST_CASE("held chunks: a failed decode is reported to its thread and tried again by the next", "[io][held]") {
  HeldChunks held(1, std::chrono::milliseconds(50));
  held.begin_pass({{{0, 0, 0}, 2}});
  int tries = 0;
  const auto decode = [&](const HeldChunks::Key&, unsigned char* into) {
    if (++tries == 1) throw std::runtime_error("damaged");
    decode_as({7, 0, 0}, into, 8);
  };
  unsigned char seen = 0;
  CHECK_THROWS_WITH(held.use({0, 0, 0}, 8, 1, 2, decode, [](const unsigned char*) {}), "damaged");
  held.use({0, 0, 0}, 8, 1, 2, decode, [&](const unsigned char* data) { seen = data[0]; });
  CHECK(tries == 2);
  CHECK(seen == 7);
  CHECK(held.size() == 1);  // the failed decode holds nothing; the retried one its chunk, a piece to go
}

TEST_CASE("held chunks: a thread whose chunk another decodes decodes the pass's next one meanwhile", "[io][held]") {
  HeldChunks held(3, std::chrono::minutes(5));
  // The pass's order is not the keys' (dates in turn: parts of two dates' chunks).
  held.begin_pass({{{0, 0, 0}, 2}, {{1, 0, 0}, 2}, {{0, 5, 0}, 2}, {{1, 5, 0}, 2}});
  std::atomic<int> decoding{0}, most{0};
  std::atomic<bool> started{false};
  std::mutex seen_lock;
  std::vector<HeldChunks::Key> decoded;
  const auto decode = [&](const HeldChunks::Key& at, unsigned char* into) {
    const int now = ++decoding;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
    }
    {
      const std::lock_guard lock(seen_lock);
      decoded.push_back(at);
    }
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    decode_as(at, into, 8);
    --decoding;
  };
  const auto nothing = [](const unsigned char*) {};
  std::thread first([&] { held.use({0, 0, 0}, 8, 1, 2, decode, nothing); });
  while (!started) std::this_thread::yield();
  held.use({0, 0, 0}, 8, 1, 2, decode, nothing);  // decodes {1, 0, 0} while the first thread decodes {0, 0, 0}
  first.join();
  CHECK(most == 2);
  REQUIRE(decoded.size() >= 2);
  CHECK(decoded[0] == HeldChunks::Key{0, 0, 0});
  CHECK(decoded[1] == HeldChunks::Key{1, 0, 0});  // the pass's next, not the next key
}
