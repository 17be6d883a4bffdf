// Files cvest creates beside an output in a folder other users can write:
// fresh unpredictable names created exclusively, never through a link; the
// lock, the journal and a killed run's leftovers never followed, and another
// user's files never written, adopted or removed (io/TempFiles.hpp).
#include "io/Disk.hpp"
#include "io/Generator.hpp"
#include "io/Input.hpp"
#include "io/OutputFile.hpp"
#include "io/OutputLock.hpp"
#include "io/Journal.hpp"
#include "io/TempFiles.hpp"
#include "Scratch.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
namespace fs = std::filesystem;

namespace {

constexpr uid_t other_uid = 54321;  // a user that is not the one running the tests

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A file holding someone else's bytes, which a planted link points at.
fs::path victim(const std::string& name) {
  const fs::path v = scratch(name);
  write_text(v, "someone's notes\n");
  return v;
}

// A process id that no longer runs.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// `.NAME.tmp-HOST-` of this host's temporary names for `path`.
std::string name_prefix(const fs::path& path) {
  const std::string ours = temp_path_for(path.string());
  const std::size_t pid_at = ours.rfind("-" + std::to_string(::getpid()) + "-");
  REQUIRE(pid_at != std::string::npos);
  return ours.substr(0, pid_at + 1);
}

// Whether files can be given to another user here (the tests run as root
// in CI); the checks that need it say so where they cannot run.
bool can_chown() { return ::geteuid() == 0; }

void give_away(const fs::path& path) { REQUIRE(::lchown(path.c_str(), other_uid, other_uid) == 0); }

}  // namespace

TEST_CASE("temporary names are fresh each time, and creating one never follows or reuses a name", "[io][shared]") {
  const auto path = scratch("named.h5");
  const std::string a = temp_path_for(path.string()), b = temp_path_for(path.string());
  CHECK(a != b);
  const std::string token = a.substr(a.rfind('-') + 1);
  CHECK(token.size() == 12);
  CHECK(std::all_of(token.begin(), token.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
  CHECK(a.find(".named.h5.tmp-") != std::string::npos);
  CHECK(a.find("-" + std::to_string(::getpid()) + "-") != std::string::npos);

  const fs::path v = victim("named_victim.txt");
  fs::create_symlink(v, a);
  errno = 0;
  CHECK(create_exclusive(a, O_WRONLY) == -1);
  CHECK(errno == EEXIST);
  CHECK(contents(v) == "someone's notes\n");
  std::string why;
  CHECK(open_own_file(a, O_RDONLY, why) == -1);
  CHECK(why == "a symbolic link");
  CHECK_FALSE(own_regular_file(a, why));

  write_text(b, "x");  // a regular file is not reused either
  errno = 0;
  CHECK(create_exclusive(b, O_WRONLY) == -1);
  CHECK(errno == EEXIST);
  CHECK(contents(b) == "x");
  const int fd = open_own_file(b, O_RDONLY, why);
  CHECK(fd >= 0);
  if (fd >= 0) ::close(fd);
  if (can_chown()) {
    give_away(b);
    CHECK(open_own_file(b, O_RDONLY, why) == -1);
    CHECK(why == "owned by another user (uid 54321)");
  } else {
    WARN("not root: another user's file at a temporary name is not checked here");
  }
  fs::remove(a);
  fs::remove(b);
}

TEST_CASE("outputs, generated inputs and reports are never written through links planted at guessable names",
          "[io][shared]") {
  quiet_hdf5_errors();
  const auto path = scratch("planted.h5"), input = scratch("planted_in.h5"), report = scratch("planted.json");
  const fs::path v = victim("planted_victim.txt");
  // The names earlier versions used (host and pid), for this process and the next ones.
  std::vector<std::string> links;
  for (const fs::path& p : {path, input, report})
    for (pid_t pid = ::getpid(); pid < ::getpid() + 20; ++pid) {
      links.push_back(name_prefix(p) + std::to_string(pid));
      fs::create_symlink(v, links.back());
    }
  {
    OutputFile out({path.string(), "cv", 1, 10, 3, Precision::f64, Compression::none, 4, 0, false, {}, true, 0});
    std::vector<double> buf(30, 2.0);
    out.write({{0, 1}, {0, 10}}, buf.data());
    out.commit({});
  }
  generate_input(input.string(), GenerateSpec{2, 10, 3, 1, Precision::f64}, false);
  write_whole_file(report.string(), "{}\n", "report");
  CHECK(fs::is_regular_file(fs::symlink_status(path)));
  CHECK(fs::is_regular_file(fs::symlink_status(input)));
  CHECK(contents(report) == "{}\n");
  CHECK(contents(v) == "someone's notes\n");
  for (const std::string& link : links) {
    CHECK(fs::is_symlink(link));  // not followed, not removed
    fs::remove(link);
  }
  // A report path that is itself a link: the link is replaced, its target left as it is.
  fs::remove(report);
  fs::create_symlink(v, report);
  write_whole_file(report.string(), "{}\n", "report");
  CHECK(fs::is_regular_file(fs::symlink_status(report)));
  CHECK(contents(v) == "someone's notes\n");
}

TEST_CASE("an output path that is a symbolic link is refused, its target untouched", "[io][shared]") {
  const auto path = scratch("linked.h5");
  const fs::path v = victim("linked_victim.txt");
  fs::create_symlink(v, path);
  for (const bool overwrite : {false, true})
    CHECK_THROWS_WITH(check_output_path(path.string(), overwrite),
                      Catch::Contains("linked.h5: output is a symbolic link") &&
                          Catch::Contains("give the target's own path, or remove the link"));
  CHECK_THROWS_AS(OutputFile({path.string(), "cv", 1, 10, 3, Precision::f64, Compression::none, 4, 0, true, {}, true, 0}),
                  InputError);
  CHECK(fs::is_symlink(path));
  CHECK(contents(v) == "someone's notes\n");
  fs::remove(path);
}

TEST_CASE("a killed run's leftovers: only regular files of ours at our names are removed", "[io][shared]") {
  quiet_hdf5_errors();
  const auto path = scratch("killed.h5");
  const std::string prefix = name_prefix(path);
  REQUIRE(prefix.find(".killed.h5.tmp-") != std::string::npos);
  const pid_t gone = dead_pid();
  const std::string dead = prefix + std::to_string(gone) + "-abcdefghijkl";
  const std::string dead_journal = dead + ".journal-0", dead_journal_new = dead + ".journal-1.new";
  const std::string dead_old_style = prefix + std::to_string(gone);  // names before random tokens
  const std::string running = prefix + std::to_string(::getppid()) + "-abcdefghijkl";
  const std::string other_host = (path.parent_path() / ".killed.h5.tmp-elsewhere-1-abcdefghijkl").string();
  const std::string unrelated = (path.parent_path() / ".killed.h5.tmp-notes").string();
  const std::string not_token = prefix + std::to_string(gone) + "-short";
  for (const auto& f : {dead, dead_journal, dead_journal_new, dead_old_style, running, other_host, unrelated, not_token})
    write_text(f, "half-written");
  const fs::path v = victim("killed_victim.txt");
  const std::string dead_link = prefix + std::to_string(gone) + "-linklinklink";
  fs::create_symlink(v, dead_link);
  const std::string others = prefix + std::to_string(gone) + "-otheruser123";
  write_text(others, "another user's run");
  if (can_chown()) give_away(others);
  else WARN("not root: a killed run of another user's is not checked here");

  { OutputFile out({path.string(), "cv", 1, 10, 3, Precision::f64, Compression::none, 4, 0, true, {}, true, 0}); }
  for (const auto& f : {dead, dead_journal, dead_journal_new, dead_old_style}) CHECK_FALSE(fs::exists(f));
  CHECK(fs::exists(running));     // another run of the same output, still going
  CHECK(fs::exists(other_host));  // its process id means nothing here
  CHECK(fs::exists(unrelated));
  CHECK(fs::exists(not_token));
  CHECK(fs::is_symlink(dead_link));  // a link is neither followed nor removed
  CHECK(contents(v) == "someone's notes\n");
  if (can_chown()) CHECK(contents(others) == "another user's run");
  else fs::remove(others);
  for (const auto& f : {running, other_host, unrelated, not_token, dead_link, others}) fs::remove(f);
}

TEST_CASE("the output lock never follows a link, nor writes or removes another user's file", "[io][shared]") {
  const auto path = scratch("locked.h5");
  const fs::path lock = path.parent_path() / ".locked.h5.lock";
  fs::remove(lock);
  const fs::path v = victim("locked_victim.txt");
  fs::create_symlink(v, lock);
  CHECK_THROWS_WITH(OutputLock(path.string()),
                    Catch::Contains("locked.h5: the lock file") && Catch::Contains(".locked.h5.lock is a symbolic link"));
  CHECK(fs::is_symlink(lock));
  CHECK(contents(v) == "someone's notes\n");
  fs::remove(lock);

  REQUIRE(::mkfifo(lock.c_str(), 0644) == 0);  // opened without blocking, refused
  CHECK_THROWS_WITH(OutputLock(path.string()), Catch::Contains("is not a regular file"));
  CHECK(fs::is_fifo(lock));
  fs::remove(lock);

  { const OutputLock ours(path.string()); CHECK(contents(lock).rfind("pid " + std::to_string(::getpid()), 0) == 0); }
  CHECK_FALSE(fs::exists(lock));  // our own is removed with the lock

  if (!can_chown()) {
    WARN("not root: a lock file of another user's is not checked here");
    return;
  }
  write_text(lock, "pid 1 on elsewhere\n");
  give_away(lock);
  {
    const OutputLock held(path.string());  // locked as it is
    CHECK(contents(lock) == "pid 1 on elsewhere\n");
    CHECK_THROWS_WITH(OutputLock(path.string()), Catch::Contains("another cvest run is writing it"));
  }
  CHECK(contents(lock) == "pid 1 on elsewhere\n");  // neither written nor removed
  fs::remove(lock);
}

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
    WARN("not root: a journal of another user's is not checked here");
  }
  for (const auto& f : {fs::path(journal), other, moved}) fs::remove(f);
}
