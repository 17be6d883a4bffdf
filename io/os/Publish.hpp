#pragma once
// Putting a finished file in place: one step for every file cvest writes
// (outputs, generated inputs, reports, journals), so that its path holds the
// old file or the new one, whole, whatever stops the process and when
// (Ctrl-C, kill -9, the OOM killer, a power loss):
//   1. the new file is synced through a descriptor checked to be the file
//      this run made (never a file swapped in at its temporary name);
//   2. it takes the path in one rename: over the file the run found there
//      (exchanged with it, then checked to be that file, so a file another
//      process put there meanwhile is given back, never lost), or onto a free
//      name (never over a file that appeared);
//   3. the folder is synced, so the name survives a power loss;
//   4. only then is the replaced file, kept at the temporary name by the
//      exchange, removed.
// The old file is never unlinked before the new one has its name.
#include "io/os/FileIdentity.hpp"

#include <functional>
#include <string>

namespace cvest::io {

// What the path a finished file takes may hold.
struct Replacing {
  FileIdentity found;      // what was at the path when the run looked (exists = false: nothing)
  bool overwrite = false;  // `found` may be replaced, and only it
};

// Puts `temp` in place at `path` as above. `made`: the temporary file's
// identity when this run created it; `fd`: a descriptor it was written
// through (-1: opened here, O_NOFOLLOW). `what` ("output", "input",
// "report") names the fault points (io/os/Faults.hpp: WHAT.synced, .renamed,
// .done). IoError naming `shown` where any step fails (a sync is never
// retried), saying what happened: replaced meanwhile, appeared meanwhile,
// or a rename the folder refuses (and why); `path` is then left as it was.
// `renamed`, where given, is called as soon as the file has its name.
void publish(const std::string& temp, const FileIdentity& made, const std::string& path, const Replacing& replacing,
             const std::string& what, const std::string& shown, int fd = -1,
             const std::function<void()>& renamed = {});

// publish's first step alone (for a file sealed before it is put in place):
// `temp` checked to be the file `made`, through `fd` (-1: opened here,
// O_NOFOLLOW), and fsynced; IoError naming `shown` otherwise (never retried).
void sync_made(const std::string& temp, const FileIdentity& made, const std::string& shown, int fd = -1);

// fsync of the folder `dir`; IoError naming `shown`.
void sync_folder(const std::string& dir, const std::string& shown);

}  // namespace cvest::io
