#pragma once
// How flat walks in memory, measured on the machine where it runs (`cvest
// tune`, app/tune/TuneWalks.hpp) and kept as the write modes are
// (app/tune/WriteModes.hpp): per CPU model and thread count in the user's cache
// folder, one record for flat/left's streams at once and one for flat/right's
// dates at once. The best count is the host's: flat/left with one stream ran
// at 0.88-1.01 of the copy roof on an AMD EPYC VM where four ran at 0.62-0.86
// (T = 80-200), while four beat one on an Intel Xeon VM; flat/right with two
// dates beat four on the Intel VM and lost to four on the AMD one
// (core/FlatRun.hpp).
#include "core/Names.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cvest::app {

// The choice a record measures: flat/left's streams, flat/right's dates at
// once, flat's stores (counts 0: regular, 1: streaming; both layouts' passes
// summed into one time per count).
enum class Walk { left_streams, right_dates, stores };
// "flat/left streams", "flat/right dates at once", "flat stores"
std::string to_string(Walk walk);
// "flat/left", "flat/right", "flat": the strategy and layout a walk belongs to.
const char* flat_name(Walk walk);
// "1 stream", "4 streams"; "1 date", "4 dates"; "regular stores", "streaming stores"
std::string counted(Walk walk, int count);
// A record's shape's dates: "100 x 12582 x 5 double" -> 100 (0 where unreadable).
Index shape_dates(const std::string& shape);

// A record's `by` where first use measured it.
inline constexpr const char* by_first_use = "first use";

struct WalkRecord {
  std::string key;   // walk_record_key: what the measurement holds for
  Walk walk = Walk::left_streams;
  std::string date;  // YYYY-MM-DD
  std::vector<std::string> shapes;  // "100 x 200000 x 5 double", each measured in turn
  std::vector<int> streams;         // the counts tried (1, 2, 4): streams or dates at once
  // seconds[s][i]: shape s's passes with streams[i] at most, one a repeat
  std::vector<std::vector<std::vector<double>>> seconds;
  Precision precision = Precision::f64;  // the elements measured (a record without one: double)
  std::string by = "cvest tune";         // or by_first_use (app/FirstUse.hpp)
  // walked[s][i]: what streams[i] walked at shape s (core/FlatRun.hpp
  // flat_walked; a spacing that does not fit walks fewer); none: a record
  // from before they were kept (12-06), or the store kinds'.
  std::vector<std::vector<int>> walked{};
  // The count whose slowest shape, against that shape's fastest count,
  // lags least, of those that walked as said (the fewest where tied): at a
  // shape where every count has a pass each round, each pass over its
  // round's fastest, the median over the rounds; else each count's median
  // over the fastest median. The store kinds, flat/left's streams, and
  // cvest tune's records without what each count walked (before 12-06): the
  // fewest within 2% of the least. First use's records without it are
  // measured again (app/FirstUse.cpp). Records saved before 12-07 are judged so too.
  int best() const;
  // The same over the shapes of fewer dates than core's flat_many_dates
  // (many = false) or of as many or more (true): the count flat takes at
  // such dates (core/FlatRun.hpp). best() where no shape lies on that side.
  int best_for(bool many) const;
  // The count chosen at shape `shape` (best_for its side of the dates; the
  // store kind's best()).
  int chosen_at(std::size_t shape) const;
  // The counts put in force: "2", or where the sides of 28 dates disagree
  // "2 below 28 dates, 1 from 28"; with
  // `walk`'s words ("2 streams below 28 dates, 1 stream from 28") where named.
  std::string counts(bool named = false) const;
  // "measured by cvest tune on DATE: at most 1 (medians of 9 passes;
  // streams, time: 100 x 200000 x 5 double: 1 21.3 ms, 2 24 ms, 4 31.9 ms; ...)";
  // flat/right's say "dates at once, time: ...", the stores'
  // "measured on first use on DATE: regular stores (... stores (0 regular, 1 streaming), time: ...)".
  std::string text() const;
  // "measured here by cvest tune on DATE": what a choice taken from it says.
  std::string source() const;
};

// "cpu MODEL (family F, model M); N threads; 32-byte vectors": this
// machine, `threads` threads, the host loops' vectors now
// (streaming::vector_bytes; none named in a build without streaming stores).
std::string walk_record_key(int threads);
// flat-walks.json in the user's cache folder (cache_file_path).
std::string walk_records_path();
// Every record (one without its walk, as the first version wrote them, is
// flat/left's). A file that cannot be read as records (damaged, not the
// user's): none, and `problem` says why in one line; no file: none, "".
std::vector<WalkRecord> read_walk_records(std::string& problem);
// This machine's records with `threads` threads (one per walk and precision
// at most), the file read once.
std::vector<WalkRecord> walk_records_here(int threads, std::string& problem);
// The record of `walk` in `precision` for this machine with `threads` threads, if any.
std::optional<WalkRecord> walk_record_for(Walk walk, int threads, std::string& problem,
                                          Precision precision = Precision::f64);
// Adds `record` (replacing one of its key, walk and precision), the file put
// in place whole under a lock (locked_update): concurrent savers each
// keep theirs.
void save_walk_record(const WalkRecord& record);

}  // namespace cvest::app
