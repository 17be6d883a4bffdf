// Files cvest creates beside an output in a folder other users can write:
// fresh unpredictable names created exclusively, never through a link; the
// lock, the journal and a killed run's leftovers never followed, and another
// user's files never written, adopted or removed (io/os/TempFiles.hpp).
#include "app/run/WriteMode.hpp"  // outputs settled as a run settles them
#include "io/os/Disk.hpp"
#include "io/os/WholeFile.hpp"
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
#include <iterator>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::test;
namespace fs = std::filesystem;

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
    cvest::test::skip_part("not root: another user's file at a temporary name");
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
    OutputFile out(app::settled_output({path.string(), "cv", 1, 10, 3, Precision::f64, {Compression::none, 4}, 0, false,
                                        {}, true, 0}));
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
  CHECK_THROWS_AS(OutputFile(app::settled_output({path.string(), "cv", 1, 10, 3, Precision::f64,
                                                  {Compression::none, 4}, 0, true, {}, true, 0})),
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
  else cvest::test::skip_part("not root: a killed run of another user's");

  {
    OutputFile out(app::settled_output({path.string(), "cv", 1, 10, 3, Precision::f64, {Compression::none, 4}, 0, true,
                                        {}, true, 0}));
  }
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

TEST_CASE("putting a file in place without replacing one: each way a file system may allow", "[io][shared]") {
  const auto text = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // RENAME_NOREPLACE; a hard link and unlink (no renameat2 there); a check
  // and a rename (no hard links either, e.g. FAT or some FUSE file systems).
  for (const unsigned ways : {unsigned(rename_noreplace), unsigned(rename_by_link), unsigned(rename_checked)}) {
    INFO("ways " << ways);
    const fs::path temp = scratch("rename.tmp"), free = scratch("rename.free"), taken = scratch("rename.taken");
    std::ofstream(temp) << "new";
    std::ofstream(taken) << "theirs";
    errno = 0;
    CHECK_FALSE(rename_without_replacing(temp.string(), taken.string(), ways));
    if (errno == ENOSYS || errno == EPERM) {  // this way is not one the scratch folder's file system has
      skip_part("the scratch folder's file system lacks rename way " + std::to_string(ways));
      continue;
    }
    CHECK(errno == EEXIST);
    CHECK(text(taken) == "theirs");  // never replaced
    CHECK(text(temp) == "new");      // and ours still where it was
    const fs::path link = scratch("rename.link");  // (scratch removes what is at its name)
    fs::create_symlink(free, link);
    CHECK_FALSE(rename_without_replacing(temp.string(), link.string(), ways));
    CHECK(errno == EEXIST);  // a dangling link is something there too
    CHECK_FALSE(fs::exists(free));
    CHECK(rename_without_replacing(temp.string(), free.string(), ways));
    CHECK(text(free) == "new");
    CHECK_FALSE(fs::exists(temp));  // moved, not copied: no second name left behind
  }
}
