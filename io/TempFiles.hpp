#pragma once
// Temporary files removed when a signal stops the process.
//
// Outputs, generated inputs and reports are written to a temporary file and
// renamed into place on success (io/Files.cpp, app/main.cpp); a failure
// removes it. A job stopped by Ctrl-C (SIGINT), a batch scheduler (SIGTERM)
// or a closed terminal (SIGHUP) would still leave it behind, as large as the
// output: the handlers installed here unlink every registered temporary file
// and let the signal end the process as it would have. SIGKILL (the OOM
// killer, a scheduler's hard limit) cannot be caught: the next run to the
// same path resumes what such a process left (io/Journal.hpp) or removes it.

#include <string>
#include <vector>

namespace cvest::io {

// Installs the handlers for SIGINT, SIGTERM and SIGHUP, except where a
// signal is ignored (nohup, a shell's background job): it stays ignored.
// Call once, early in main.
void remove_temp_files_on_signals();

// Where the output or generated input `path` is written until it is
// complete: `.NAME.tmp-HOST-PID` beside it (the host too: a folder may be
// shared between machines, whose process ids mean nothing here).
std::string temp_path_for(const std::string& path);

// The temporary files of `path` that a process of this host left behind and
// that no longer runs (killed, crashed), sorted; with_companions, their
// resume journals too. Those of running processes and of other hosts are
// not listed.
std::vector<std::string> stale_temp_files(const std::string& path, bool with_companions);
// Removes them all (journals included) and returns their paths.
std::vector<std::string> remove_stale_temp_files(const std::string& path);

// Registers a temporary file's path for the handlers while it lives. It never
// removes anything itself: the owner removes or renames the file as before.
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  bool registered() const { return slot_ >= 0; }
  // SIGTERM (a scheduler's time limit) leaves this file in place: a
  // resumable output and its journal, which the next run continues.
  // SIGINT and SIGHUP still remove it.
  void keep_on_terminate(bool keep);

 private:
  int slot_ = -1;
};

}  // namespace cvest::io
