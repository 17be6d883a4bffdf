#pragma once
// Temporary files: unpredictable names, created exclusively, removed when a
// signal stops the process.
//
// Users share folders (group-writable, often without the sticky bit): a name
// another user can predict, opened with O_CREAT or O_TRUNC, lets them plant
// a symbolic link there and have cvest write through it. So every file cvest
// creates beside an output has a random component in its name and is
// created with O_CREAT | O_EXCL | O_NOFOLLOW (HDF5's H5F_ACC_EXCL), and what
// cvest removes or takes over (a killed run's files) is a regular file owned
// by the running user, looked at with lstat, never through a link.
//
// Outputs, generated inputs and reports are written to a temporary file and
// put in place on success (io/os/Publish.hpp); a failure removes it. A job stopped by Ctrl-C (SIGINT), a batch scheduler (SIGTERM)
// or a closed terminal (SIGHUP) would still leave it behind, as large as the
// output: the handlers installed here unlink every registered temporary file
// and let the signal end the process as it would have. SIGKILL (the OOM
// killer, a scheduler's hard limit) cannot be caught: the next run to the
// same path resumes what such a process left (io/output/Journal.hpp) or removes it.

#include <string>
#include <vector>

namespace cvest::io {

// Installs the handlers for SIGINT, SIGTERM and SIGHUP, except where a
// signal is ignored (nohup, a shell's background job): it stays ignored.
// Call once, early in main.
void remove_temp_files_on_signals();

// A fresh name where the output or generated input `path` (or a report, an
// MPI rank's part file) is written until it is complete:
// `.NAME.tmp-HOST-PID-TOKEN` beside it. The host because a folder may be
// shared between machines, whose process ids mean nothing here; the pid so
// a later run can tell a killed run's file; TOKEN, 12 random letters and
// digits, so no one can plant a link at the name before it is created.
std::string temp_path_for(const std::string& path);

// Creates `path` as a new file (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0644, plus
// `flags`: O_WRONLY or O_RDWR): never through a link, never an existing
// file. The descriptor, or -1 with errno (EEXIST where any name is there).
int create_exclusive(const std::string& path, int flags);
// create_exclusive at `temp` (O_WRONLY), and on a clash (EEXIST) at fresh
// temporary names for `path` (up to 16), each registered with `guard`
// before it is tried; `temp` ends as the name used. The descriptor, or -1
// with errno from the last try.
class TempFileGuard;
int create_exclusive_temp(const std::string& path, std::string& temp, TempFileGuard& guard);
// Opens an existing file of ours at `path` (O_NOFOLLOW | O_NONBLOCK plus
// `flags`), checked with fstat to be a regular file owned by the running
// user. The descriptor, or -1 with `why` saying what was found instead.
int open_own_file(const std::string& path, int flags, std::string& why);
// Whether `path` itself (lstat: a link is not followed) is a regular file
// owned by the running user; `why` says what it is otherwise.
bool own_regular_file(const std::string& path, std::string& why);

// The ways rename_without_replacing may take, in this order: each next one
// where the file system lacks the one before (tests take one at a time).
enum RenameWays : unsigned { rename_noreplace = 1, rename_by_link = 2, rename_checked = 4, rename_any = 7 };
// Renames `temp` onto `path` where nothing is there: RENAME_NOREPLACE, or a
// hard link and unlink where the file system lacks it (both fail where a
// name appeared), or (no hard links either) a check that nothing is there
// and a rename. False with errno EEXIST when something is at `path`.
bool rename_without_replacing(const std::string& temp, const std::string& path, unsigned ways = rename_any);

// The temporary files of `path` that a process of this host left behind and
// that no longer runs (killed, crashed), sorted; with_companions, their
// resume journals too. Only regular files owned by the running user are
// listed: those of running processes, of other hosts and of other users, and
// links or anything else at such names, are not.
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
  // Registers `path` instead (a temporary name retried after a clash).
  void retarget(const std::string& path);
  // SIGTERM (a scheduler's time limit) leaves a resumable output in place
  // for the next run: its records (resume journal, seal) and the output's
  // temporary file, all only where one of its records is on disk and larger
  // than `larger_than` bytes (a journal's header: it records no block yet;
  // LLONG_MAX: not a record yet). SIGINT and SIGHUP still remove them all.
  void keep_on_terminate_as_record(long long larger_than = 0);
  void keep_on_terminate_if_recorded();
  // SIGTERM removes it too (the default).
  void remove_on_terminate();

 private:
  int slot_ = -1;
};

// Removes what a killed earlier run left at `path`'s temporary name (a line
// on stderr for each): a 160 GB job killed by the OOM killer leaves a file as
// large as its output, which the free-space check would count against the rerun.
void clean_up_after_killed_runs(const std::string& path);

}  // namespace cvest::io
