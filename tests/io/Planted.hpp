#pragma once
// Files another user could have planted in a shared folder, for the tests
// that check cvest never follows, adopts or removes them.
#include "io/os/TempFiles.hpp"
#include "Scratch.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cvest::test {

using namespace cvest::io;
namespace fs = std::filesystem;

inline constexpr uid_t other_uid = 54321;  // a user that is not the one running the tests

inline std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A file holding someone else's bytes, which a planted link points at.
inline fs::path victim(const std::string& name) {
  const fs::path v = scratch(name);
  write_text(v, "someone's notes\n");
  return v;
}

// A process id that no longer runs.
inline pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// `.NAME.tmp-HOST-` of this host's temporary names for `path`.
inline std::string name_prefix(const fs::path& path) {
  const std::string ours = temp_path_for(path.string());
  const std::size_t pid_at = ours.rfind("-" + std::to_string(::getpid()) + "-");
  REQUIRE(pid_at != std::string::npos);
  return ours.substr(0, pid_at + 1);
}

// Whether files can be given to another user here (the tests run as root
// in CI); the checks that need it say so where they cannot run.
inline bool can_chown() { return ::geteuid() == 0; }

inline void give_away(const fs::path& path) { REQUIRE(::lchown(path.c_str(), other_uid, other_uid) == 0); }

}  // namespace cvest::test
