#include "app/tune/WalkRecords.hpp"

#include "core/FlatRun.hpp"
#include "core/Median.hpp"
#include "core/Spaces.hpp"
#include "core/StreamingStores.hpp"
#include "app/tune/RecordFile.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace cvest::app {

namespace {

// " (family 26, model 2)": VMs name every EPYC alike.
std::string cpu_generation() {
  const std::string family = cpuinfo_value("cpu family");
  return family.empty() ? std::string() : fmt::format(" (family {}, model {})", family, cpuinfo_value("model"));
}

void check(const WalkRecord& r) {
  if (r.shapes.empty() || r.streams.empty() || r.seconds.size() != r.shapes.size())
    throw std::invalid_argument("a record without its shapes");
  for (const int s : r.streams)
    if (r.walk == Walk::stores ? s != 0 && s != 1 : s != 1 && s != 2 && s != 4)
      throw std::invalid_argument("a count of " + std::to_string(s));
  if (!r.walked.empty() && (r.walk == Walk::stores || r.walked.size() != r.seconds.size()))
    throw std::invalid_argument("a record without what each shape walked");
  for (const auto& counts : r.walked) {
    if (counts.size() != r.streams.size()) throw std::invalid_argument("a shape without what each count walked");
    for (std::size_t i = 0; i < counts.size(); ++i)
      if (counts[i] < 1 || counts[i] > r.streams[i])
        throw std::invalid_argument("a count of " + std::to_string(r.streams[i]) + " that walked " +
                                    std::to_string(counts[i]));
  }
  for (const auto& shape : r.seconds) {
    if (shape.size() != r.streams.size()) throw std::invalid_argument("a shape without every count's passes");
    for (const auto& passes : shape)
      if (passes.empty() || *std::min_element(passes.begin(), passes.end()) <= 0)
        throw std::invalid_argument("a count without its passes");
  }
}

// "by cvest tune", "on first use"
std::string how(const std::string& by) { return by == by_first_use ? "on first use" : "by " + by; }

const char* walk_name(Walk walk) {
  return walk == Walk::right_dates ? "right dates" : walk == Walk::stores ? "stores" : "left streams";
}

Walk walk_named(const std::string& name) {
  if (name == "left streams") return Walk::left_streams;
  if (name == "right dates") return Walk::right_dates;
  if (name == "stores") return Walk::stores;
  throw std::invalid_argument("a walk named '" + name.substr(0, 40) + "'");
}

}  // namespace

std::string to_string(Walk walk) {
  return walk == Walk::right_dates ? "flat/right dates at once" : walk == Walk::stores ? "flat stores" : "flat/left streams";
}

const char* flat_name(Walk walk) {
  return walk == Walk::right_dates ? "flat/right" : walk == Walk::stores ? "flat" : "flat/left";
}

std::string counted(Walk walk, int count) {
  if (walk == Walk::stores) return count ? "streaming stores" : "regular stores";
  return fmt::format("{} {}{}", count, walk == Walk::right_dates ? "date" : "stream", count == 1 ? "" : "s");
}

Index shape_dates(const std::string& shape) { return Index(std::strtoll(shape.c_str(), nullptr, 10)); }

namespace {

// Whether r.streams[i] walked as said at every shape `take` keeps (a record
// without `walked`: as said).
template <class Take>
bool walked_as_said(const WalkRecord& r, std::size_t i, Take take) {
  for (std::size_t s = 0; s < r.walked.size(); ++s)
    if (take(s) && i < r.walked[s].size() && r.walked[s][i] != r.streams[i]) return false;
  return true;
}

// Whether every count at a shape has as many passes: one a round.
bool in_rounds(const std::vector<std::vector<double>>& shape) {
  return std::all_of(shape.begin(), shape.end(),
                     [&](const std::vector<double>& p) { return p.size() == shape.front().size(); });
}

// How far count i lags at one shape's passes ([count][round]): where
// every count has one pass a round (first use's and cvest tune's, a
// round's passes milliseconds apart on a machine whose bandwidth swings
// within seconds), the median over rounds of its pass over that round's
// fastest; else its median over the fastest median. Over 132 first uses on
// a Zen 4 VM, the medians took fewer than four dates at once at 100 dates
// in 14 (one date in 2), the rounds' ratios in 5 (one in none), where the
// bench at 100 x 400,000 ran four at 0.91-0.97 of the roof and one at 0.84.
double lag_at(const std::vector<std::vector<double>>& shape, std::size_t i) {
  const std::size_t rounds = shape[i].size();
  if (!in_rounds(shape)) {
    double fastest = median(shape[0]);
    for (const auto& passes : shape) fastest = std::min(fastest, median(passes));
    return median(shape[i]) / fastest;
  }
  std::vector<double> ratios;
  ratios.reserve(rounds);
  for (std::size_t k = 0; k < rounds; ++k) {
    double fastest = shape[0][k];
    for (const auto& passes : shape) fastest = std::min(fastest, passes[k]);
    ratios.push_back(shape[i][k] / fastest);
  }
  return median(ratios);
}

// best()'s rule over the shapes `take` keeps.
template <class Take>
int best_over(const WalkRecord& r, Take take) {
  const auto& streams = r.streams;
  std::vector<double> lags(streams.size(), 0.0);
  for (std::size_t i = 0; i < streams.size(); ++i)
    for (std::size_t s = 0; s < r.seconds.size(); ++s)
      if (take(s)) lags[i] = std::max(lags[i], lag_at(r.seconds[s], i));
  if (lags.empty()) return 0;
  // A count that walked as a fewer one measured that one's walk again: not a
  // contender. Of the rest the least lag, the fewest where tied: with each
  // timed pass after an untimed one of its own, the fewest within 2% took
  // fewer than four dates at once at 100 dates in 8 of 31 first uses (the
  // least, four, in 28 of 31), where the bench at 400,000 ids ran four at
  // 0.85-0.99 of the roof and two at 0.78-0.95. The store kinds keep the
  // 2% (nothing measured says otherwise), as do records without what each
  // count walked (cvest tune's before 12-06: a count could walk as a fewer
  // one, and its passes followed another count's), and flat/left's
  // streams: more streams must lead by more than 2%. With the runs walk
  // compiled on locals (12-07) first use's 48 MiB arrays put four streams
  // only 1.5-3.6% behind the fastest on a Zen 4 VM (medians over 47 first
  // uses; four taken below 28 dates in 5 of them, at 100 dates in 4) where
  // the bench at 4-100 dates ran four at 0.82-1.00 of the roof (0.88 or
  // less in 7 of 12) and one at 0.91-1.02; within 2% the fewer: four below
  // 28 in none of those 47, at 100 in one (the same passes). Where four
  // streams won (an Intel Xeon VM) they led one by over 20%.
  const bool band =
      r.walk == Walk::stores || r.walk == Walk::left_streams || (r.walked.empty() && r.by != by_first_use);
  const double alike = band ? 1.02 : 1.0;
  double least = 0;
  bool any = false;
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (walked_as_said(r, i, take) && (!any || lags[i] < least)) least = lags[i], any = true;
  std::size_t best = streams.size();  // none yet (a store kind's counts start at 0)
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (walked_as_said(r, i, take) && lags[i] <= least * alike && (best == streams.size() || streams[i] < streams[best]))
      best = i;
  // None walked as said (one stream or date always does: not in practice): the fewest.
  if (best == streams.size()) return *std::min_element(streams.begin(), streams.end());
  return streams[best];
}

}  // namespace

int WalkRecord::best() const {
  return best_over(*this, [](std::size_t) { return true; });
}

int WalkRecord::best_for(bool many) const {
  const auto side = [&](std::size_t s) {
    const Index T = s < shapes.size() ? shape_dates(shapes[s]) : 0;
    return T > 0 && (T >= policy::flat_many_dates) == many;
  };
  bool any = false;
  for (std::size_t s = 0; s < seconds.size(); ++s) any = any || side(s);
  return any ? best_over(*this, side) : best();
}

int WalkRecord::chosen_at(std::size_t shape) const {
  if (walk == Walk::stores || shape >= shapes.size()) return best();
  return best_for(shape_dates(shapes[shape]) >= policy::flat_many_dates);
}

std::string WalkRecord::counts(bool named) const {
  const auto said = [&](int count) { return named ? counted(walk, count) : std::to_string(count); };
  if (walk == Walk::stores) return said(best());
  // What apply_walk_record puts in force: each side's count (best() over
  // both sides can name a fewer count than either side chose).
  const int few = best_for(false), many = best_for(true);
  return said(few) + policy::flat_counts_below(few, many, said(many));
}

std::string WalkRecord::text() const {
  std::string shapes_text;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    shapes_text += fmt::format("{}{}:", s ? "; " : "", shapes[s]);
    for (std::size_t i = 0; i < streams.size(); ++i)
      shapes_text += fmt::format("{} {}{} {:.3g} ms", i ? "," : "", streams[i],
                                 s < walked.size() && i < walked[s].size() && walked[s][i] != streams[i]
                                     ? fmt::format(" (walked {})", walked[s][i]) : std::string(),
                                 median(seconds[s][i]) * 1e3);
  }
  const std::size_t passes = seconds.empty() || seconds[0].empty() ? 0 : seconds[0][0].size();
  // The times are medians; the choice is the rounds' where they pair (lag_at).
  const bool rounds = std::all_of(seconds.begin(), seconds.end(), in_rounds);
  const std::string of = fmt::format("medians of {} passes{}", passes, rounds ? ", chosen round by round" : "");
  if (walk == Walk::stores)
    return fmt::format("measured {} on {}: {} ({}; stores (0 regular, 1 streaming), time: {})", how(by), date,
                       counted(walk, best()), of, shapes_text);
  return fmt::format("measured {} on {}: at most {} ({}; {}, time: {})", how(by), date, counts(), of,
                     walk == Walk::right_dates ? "dates at once" : "streams", shapes_text);
}

std::string WalkRecord::source() const { return "measured here " + how(by) + " on " + date; }

std::string walk_record_key(int threads) {
  const std::string cpu = cpu_model();
  // The vectors' width too: the walks' speeds differ with it at the fast
  // moments (docs/benchmarks.md), so a width of its own measures afresh.
  const int vectors = streaming::vector_bytes();
  return fmt::format("cpu {}{}; {} thread{}{}", cpu.empty() ? "unknown" : cpu, cpu_generation(), threads,
                     threads == 1 ? "" : "s", vectors > 0 ? fmt::format("; {}-byte vectors", vectors) : "");
}

std::string walk_records_path() { return cache_file_path("flat-walks.json"); }

std::vector<WalkRecord> read_walk_records(std::string& problem) {
  return read_records<WalkRecord>(walk_records_path(), [](const nlohmann::json& r) {
    WalkRecord rec{r.at("key").get<std::string>(),
                   walk_named(r.value("walk", std::string("left streams"))),
                   r.at("date").get<std::string>(),
                   r.at("shapes").get<std::vector<std::string>>(),
                   r.at("streams").get<std::vector<int>>(),
                   r.at("seconds").get<std::vector<std::vector<std::vector<double>>>>(),
                   precision_from_name(r.value("precision", std::string("double"))),
                   r.value("by", std::string("cvest tune")),
                   r.value("walked", std::vector<std::vector<int>>{})};
    if (rec.by != "cvest tune" && rec.by != by_first_use) throw std::invalid_argument("measured by '" + rec.by.substr(0, 40) + "'");
    check(rec);
    return rec;
  }, problem);
}

std::vector<WalkRecord> walk_records_here(int threads, std::string& problem) {
  const std::string key = walk_record_key(threads);
  std::vector<WalkRecord> here;
  for (auto& r : read_walk_records(problem))
    if (r.key == key) here.push_back(std::move(r));
  return here;
}

std::optional<WalkRecord> walk_record_for(Walk walk, int threads, std::string& problem, Precision precision) {
  for (auto& r : walk_records_here(threads, problem))
    if (r.walk == walk && r.precision == precision) return r;
  return std::nullopt;
}

void save_walk_record(const WalkRecord& record) {
  check(record);
  locked_update(walk_records_path(), [&] {
    std::string problem;  // a damaged file is replaced
    nlohmann::json j = nlohmann::json::array();
    const auto same = [](const WalkRecord& a, const WalkRecord& b) {
      return a.key == b.key && a.walk == b.walk && a.precision == b.precision;
    };
    for (const auto& r : with_record(read_walk_records(problem), record, same)) {
      j.push_back({{"key", r.key}, {"walk", walk_name(r.walk)}, {"precision", std::string(to_string(r.precision))},
                   {"by", r.by}, {"date", r.date}, {"shapes", r.shapes}, {"streams", r.streams},
                   {"seconds", r.seconds}, {"best", r.best()}});
      if (!r.walked.empty()) j.back()["walked"] = r.walked;
    }
    write_records(walk_records_path(), j, "flat walk record");
  });
}

}  // namespace cvest::app
