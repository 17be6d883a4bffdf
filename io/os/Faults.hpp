#pragma once
// Faults injected for tests, so that the failure paths of a distributed run
// (and of one process) run for real: CVEST_FAULT="POINT@RANK" makes POINT
// fail on that rank (several: "POINT,POINT@RANK,...") (the launcher's rank of this process: mpiexec's, Slurm's;
// 0 without a launcher) as the real fault would:
//   open_input  the input file cannot be opened (as if unreadable);
//   write       the output's first write fails with ENOSPC (disk full);
//   write_eio   the same with EIO (a failing disk);
//   writeback_eio  a compressed output's write-behind (io/os/WriteBehind.hpp)
//               reports EIO from writeback at its first chunk, whatever
//               the output's size;
//   direct_refused  O_DIRECT writes fail with EINVAL (a file system that
//               takes O_DIRECT at open but refuses its writes), and `auto`
//               tries them whatever the output's size;
//   writeback_threshold=BYTES  the page cache's write-back threshold taken
//               as BYTES (0: `auto` writes even a small output direct);
//   kill        the process is killed (SIGKILL) as it writes its first block;
//   slow_write  every block write waits 0.3 s (slow_write=MS: MS milliseconds)
//               first (so a test can act while a run is under way);
//   kill_before_journal  killed after a batch of blocks is synced to disk,
//               before the journal records it;
//   kill_at_commit  killed while committing: attributes written, the file
//               synced and sealed, not yet renamed;
//   fsync       the first fsync of a file put in place (the finished
//               output) fails with EIO, once: a retry would succeed;
//   kill_after_blocks=N  killed (SIGKILL) as soon as N blocks' writes have
//               returned, saying first how many of them the journal had
//               recorded (so a test knows what the next run must resume);
//   kill_at=STEP, interrupt_at=STEP, terminate_at=STEP  SIGKILL, SIGINT
//               (whose handler removes the temporary files) or SIGTERM
//               (whose handler keeps a resumable output, io/os/TempFiles.hpp),
//               at a step of putting a file in place (io/os/Publish.hpp), STEP
//               being WHAT.WHEN: WHAT output, input (generated) or report;
//               WHEN synced (before the rename), renamed (before the
//               folder's sync), done (after it); for the output also
//               journal_made (its resume journal just created, holding
//               no block), recorded (after each batch of blocks the
//               journal records),
//               journal_gone (before its metadata is written) and sealed
//               (before the rename; io/output/OutputFile.hpp);
//   no_exchange  renameat2(RENAME_EXCHANGE) fails with EINVAL, as on a file
//               system without it: a file is put in place by rename(2).
// Unset (every normal run), nothing is injected.
#include <string_view>

namespace cvest::io {

bool fault_injected(std::string_view point);
// N of a fault given as POINT=N (on this rank); -1 when not injected.
long fault_value(std::string_view point);

// Stops the process as kill_at / interrupt_at / terminate_at say where `step` is theirs.
void stop_if_injected(std::string_view step);

// slow_write[=MS]: sleeps MS milliseconds (300 without a value) before a
// block's write, so that tests overlap runs or catch one mid-run.
void slow_write_if_injected();

// This process's rank as its launcher's environment gives it; 0 without one.
int launcher_rank();

}  // namespace cvest::io
