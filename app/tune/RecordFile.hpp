#pragma once
// A file of measured records in the user's cache folder (cvest tune's write
// modes and flat walks): read whole where it is the user's own regular file,
// each record parsed; damaged, one line saying so and none taken; written
// whole (a fresh file renamed over the old), one record per key.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cvest::app {

// A file `name` in the user's cache folder, where cvest tune's records go:
// $CVEST_CACHE_DIR, else $XDG_CACHE_HOME/cvest, else ~/.cache/cvest.
std::string cache_file_path(const std::string& name);
// The whole of `path` into `text`, where it is a regular file of the running
// user's (not followed where a link). False with `problem` empty where there
// is none; false with `problem` ("PATH: not read (it is ...)") otherwise.
bool read_own_text(const std::string& path, std::string& text, std::string& problem);
// "YYYY-MM-DD", local time: a record's date.
std::string today();

// Every record of `path`'s "records", each from `parse(json)` (which throws
// where one is damaged). No file: none, `problem` "". A file not read or
// damaged: none, `problem` one line.
template <class Record, class Parse>
std::vector<Record> read_records(const std::string& path, Parse parse, std::string& problem) {
  std::string text;
  if (!read_own_text(path, text, problem)) return {};
  std::vector<Record> records;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);  // kept: the loop walks a part of it
    for (const auto& r : j.at("records")) records.push_back(parse(r));
  } catch (const std::exception& e) {
    problem = path + ": damaged, not used (" + std::string(e.what()).substr(0, 120) +
              "); run cvest tune again to measure anew";
    return {};
  }
  return records;
}

// `records` with `record` in place of any `same` as it (by default, of its key).
template <class Record, class Same>
std::vector<Record> with_record(std::vector<Record> records, const Record& record, Same same) {
  records.erase(std::remove_if(records.begin(), records.end(), [&](const Record& r) { return same(r, record); }),
                records.end());
  records.push_back(record);
  return records;
}
template <class Record>
std::vector<Record> with_record(std::vector<Record> records, const Record& record) {
  return with_record(std::move(records), record, [](const Record& a, const Record& b) { return a.key == b.key; });
}

// Runs `update` (read the records, add one, write_records) holding an
// exclusive lock (flock) on `path`.lock, its folder made first: two
// processes saving at once each read the other's record before writing
// (a read, then a rename over the file, by each at once lost one of them).
// Where no lock can be taken (a file system without flock): unlocked.
void locked_update(const std::string& path, const std::function<void()>& update);

// {"records": [...]} put in place whole at `path`, its folder made first.
// IoError naming `what` where it cannot be written.
void write_records(const std::string& path, const nlohmann::json& records, const std::string& what);

}  // namespace cvest::app
