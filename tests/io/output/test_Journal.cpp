// The resume journal in a shared folder.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "io/output/Journal.hpp"
#include "io/os/TempFiles.hpp"
#include "tests/io/Scratch.hpp"
#include "tests/io/Planted.hpp"

#include "tests/Skip.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

TEST_CASE("a journal is created only at new names, and resumes only the file it names", "[io][shared]") {
  const auto data = scratch("jdata.bin"), other = scratch("jother.bin"), moved = scratch("jmoved.bin");
  write_text(data, std::string(4096, 'd'));
  write_text(other, std::string(4096, 'o'));
  const std::string journal = data.string() + ".journal-0";
  fs::remove(journal);
  const Fingerprint job{{"job", "a"}};
  const fs::path v = victim("journal_victim.txt");
  std::string why;

  fs::create_symlink(v, journal + ".new");  // a link at the journal's own new name
  CHECK_THROWS_WITH(Journal(journal, data.string(), job), Catch::Contains("cannot create the resume journal"));
  CHECK(fs::is_symlink(journal + ".new"));
  CHECK_FALSE(fs::exists(fs::symlink_status(journal)));
  fs::remove(journal + ".new");
  fs::create_symlink(v, journal);  // a link at the journal's name: not replaced, not followed
  CHECK_THROWS_WITH(Journal(journal, data.string(), job), Catch::Contains("cannot move the resume journal into place"));
  CHECK(fs::is_symlink(journal));
  CHECK_FALSE(fs::exists(fs::symlink_status(journal + ".new")));
  CHECK_FALSE(Journal::read(journal, data.string(), job, why));
  CHECK(why.find("is a symbolic link") != std::string::npos);
  CHECK(contents(v) == "someone's notes\n");
  fs::remove(journal);
  const fs::path data_link = scratch("jlink.bin");
  fs::create_symlink(data, data_link);  // nor is the output it syncs opened through a link
  CHECK_THROWS_WITH(Journal(data_link.string() + ".journal-0", data_link.string(), job),
                    Catch::Contains("is a symbolic link"));
  fs::remove(data_link);

  { const Journal written(journal, data.string(), job, {{{0, 1}, {0, 10}}}); }
  const auto back = Journal::read(journal, data.string(), job, why);
  REQUIRE(back);
  CHECK(back->size() == 1);
  CHECK_FALSE(Journal::read(journal, other.string(), job, why));  // the same job, another file
  CHECK(why.find("its journal names another file") != std::string::npos);
  fs::rename(data, moved);  // a rename keeps what it names
  CHECK(Journal::read(journal, moved.string(), job, why));
  if (can_chown()) {
    give_away(journal);
    CHECK_FALSE(Journal::read(journal, moved.string(), job, why));
    CHECK(why.find("owned by another user") != std::string::npos);
  } else {
    cvest::test::skip_part("not root: a journal of another user's");
  }
  for (const auto& f : {fs::path(journal), other, moved}) fs::remove(f);
}

TEST_CASE("the journal syncs a batch when it is full, and a smaller one a while after the last", "[io][journal]") {
  const fs::path data = scratch("cadence.h5"), path = scratch("cadence.journal");
  std::ofstream(data) << "data";
  // A 4 s timer here (1 s in runs): far from a full batch's few milliseconds
  // of syncs, however busy the disk.
  constexpr std::size_t batch = std::size_t(1) << 20, piece = batch / 4;
  constexpr double timer = 4.0;
  Journal journal(path.string(), data.string(), {{"job", "cadence"}}, {}, batch, timer, 1.0);  // not paced
  const auto wait_for_sync = [&](int after, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (journal.syncs() <= after && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return journal.syncs() > after;
  };
  // Full: synced at once, long before the timer.
  for (int full = 0; full < 3; ++full) {
    const int before = journal.syncs();
    const auto start = std::chrono::steady_clock::now();
    for (Index i = 0; i < 4; ++i) journal.written(Block{{full, full + 1}, {i, i + 1}}, piece);
    REQUIRE(wait_for_sync(before, 3 * timer));
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timer / 2);
  }
  // Less than a batch: nothing for half the timer (it restarted with the
  // last sync), then synced when it runs out.
  const int before = journal.syncs();
  journal.written(Block{{5, 6}, {0, 1}}, piece);
  std::this_thread::sleep_for(std::chrono::duration<double>(timer / 2));
  CHECK(journal.syncs() == before);
  CHECK(wait_for_sync(before, 3 * timer));
  journal.close();
  std::string why;
  const auto blocks = Journal::read(path.string(), data.string(), {{"job", "cadence"}}, why);
  REQUIRE(blocks);
  CHECK(blocks->size() == 13);  // every block recorded, once
}

TEST_CASE("the journal pauses after a batch so that its syncs take at most their share of the time", "[io][journal]") {
  CHECK(pause_after(0.5, 0.05) == Approx(9.5));
  CHECK(pause_after(0.5, 0.25) == Approx(1.5));
  CHECK(pause_after(0.5, 1.0) == 0.0);
  CHECK(pause_after(0.5, 0.0) == 0.0);  // no share: no pause (never a division by zero)
  CHECK(pause_after(0.0) == 0.0);
  CHECK(pause_after(100.0) == max_journal_pause);
  const fs::path data = scratch("paced.h5"), path = scratch("paced.journal");
  fs::remove(path);
  std::ofstream(data) << "data";
  // The same 4 MiB rewritten before each block: each batch's fdatasync
  // writes some of it back, so syncs take milliseconds on a disk and the
  // pauses (3x) are longer than the writer's steps (on tmpfs they are not,
  // and the check below holds however the batches fall).
  constexpr double share = 0.25;
  constexpr std::size_t batch = std::size_t(1) << 20;
  Journal journal(path.string(), data.string(), {{"job", "paced"}}, {}, batch, 4.0, share);
  const int fd = ::open(data.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const std::string bytes(std::size_t(4) << 20, 'x');
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Index written = 0;
  while (journal.syncs() < 4 && std::chrono::steady_clock::now() < until) {
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size()));
    journal.written(Block{{0, 1}, {written, written + 1}}, batch);  // a full batch each: synced as soon as allowed
    ++written;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(fd);
  journal.close();
  const auto times = journal.batch_times();
  REQUIRE(times.size() >= 2);
  CHECK(int(times.size()) == journal.syncs());
  double synced = 0;
  for (std::size_t b = 0; b < times.size(); ++b) {
    synced += times[b].end - times[b].begin;
    if (b > 0) {  // no batch before the pause after the one before it
      INFO("batch " << b << " began " << times[b].begin << " s, the one before took " << times[b - 1].begin << "-"
                    << times[b - 1].end << " s");
      CHECK(times[b].begin >= times[b - 1].end + pause_after(times[b - 1].end - times[b - 1].begin, share) - 1e-6);
    }
  }
  CHECK(journal.sync_seconds() == Approx(synced));
  CHECK_THAT(journal.text(), Catch::StartsWith("journal: " + std::to_string(times.size()) + " batches synced ("));
  CHECK_THAT(journal.text(), Catch::Contains("paced to ~25% of the time"));
  std::string why;
  const auto blocks = Journal::read(path.string(), data.string(), {{"job", "paced"}}, why);
  REQUIRE(blocks);
  CHECK(blocks->size() >= times.size());  // each batch recorded its blocks; those after the last were not synced
  CHECK(Index(blocks->size()) <= written);
  fs::remove(path);
  fs::remove(data);
}
