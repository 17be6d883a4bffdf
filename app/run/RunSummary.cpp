#include "app/run/RunSummary.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <initializer_list>
#include <ostream>
#include <vector>

namespace cvest::app {

namespace {

// `text` in at most `width` columns, cut in its middle: a path's start and
// its file name both show.
std::string elided(const std::string& text, std::size_t width) {
  width = std::max<std::size_t>(width, 16);
  if (text.size() <= width) return text;
  const std::size_t tail = (width - 3) * 2 / 3;
  return text.substr(0, width - 3 - tail) + "..." + text.substr(text.size() - tail);
}

// head, path, tail in summary_width: the path cut to make room.
std::string with_path(const std::string& head, const std::string& path, const std::string& tail) {
  const std::size_t used = head.size() + tail.size();
  return elided(head + elided(path, used < summary_width ? summary_width - used : 0) + tail, summary_width);
}

// The first of `forms` (longest first) that fits summary_width; the last cut to fit.
std::string fitted(std::initializer_list<std::string> forms) {
  for (const std::string& form : forms)
    if (form.size() <= summary_width) return form;
  return elided(*(forms.end() - 1), summary_width);
}

std::string job_name(const JobReport& job) {
  return fmt::format("{}/{}", to_string(job.strategy), to_string(job.layout));
}

std::string header(const RunReport& rep) {
  const std::string precision = rep.jobs.empty() ? "" : " " + std::string(to_string(rep.jobs.front().precision));
  const std::string ranks = rep.ranks > 1 ? fmt::format(" a rank, {} ranks", rep.ranks) : "";
  return with_path("cvest run ", rep.deck,
                   fmt::format("  {} x {} x {}{}  {} ({} threads{})  budget {}", rep.T, rep.N, rep.K, precision,
                               rep.build.backend, rep.build.threads, ranks, format_bytes(double(rep.memory_budget))));
}

// "chunks (1, 4000, 5); read with pread, through the page cache": the
// storage, who reads it and how it reached memory.
std::string input_line(const RunReport& rep) {
  const std::string storage = to_text(rep.input_storage);
  const std::size_t cut = storage.find("; ");
  std::string how = storage.substr(0, cut);
  if (cut != std::string::npos) how += "; " + choice_of(storage.substr(cut + 2), ":;,");
  if (!rep.input_reads.empty()) how += ", " + choice_of(rep.input_reads);
  if (std::any_of(rep.jobs.begin(), rep.jobs.end(), [](const JobReport& j) { return j.read_ahead; }))
    how += ", read ahead";
  return with_path("input   ", rep.input, "  " + how);
}

std::string output_line(const RunReport& rep) {
  std::string how = rep.output_compression.kind == Compression::none ? "uncompressed"
                                                                      : to_text(rep.output_compression);
  if (!rep.output_writes.empty()) how += ", written " + choice_of(rep.output_writes);
  return with_path("output  ", rep.output, "  " + how);
}

// The phases the table shows: read, kernel and write always; the
// host-device copies (or host transposes) where a job spent time that shows
// at three decimals in them.
std::vector<Phase> shown_phases(const RunReport& rep) {
  std::vector<Phase> phases;
  for (int p = 0; p < phase_count; ++p) {
    const bool copy = Phase(p) == Phase::h2d || Phase(p) == Phase::d2h;
    if (!copy || std::any_of(rep.jobs.begin(), rep.jobs.end(),
                             [p](const JobReport& j) { return j.stats.seconds[p] >= 0.0005; }))
      phases.push_back(Phase(p));
  }
  return phases;
}

// Whether a job's output is known to equal multBy * discount bit for bit:
// the first job's is checked after the jobs ([run] verify), every later
// job's was compared with it bit for bit as it ran.
std::string verified_text(const RunReport& rep, const JobReport& job) {
  if (rep.verified) return "yes";
  return job.wrote_output ? "no" : "matches";
}

void print_jobs(const RunReport& rep, std::ostream& out) {
  const std::vector<Phase> phases = shown_phases(rep);
  std::string head = fmt::format("{:<14} {:<6} {:>8}", "strategy", "layout", "total s");
  for (const Phase p : phases) head += fmt::format(" {:>7}", to_string(p));
  fmt::print(out, "\n{} {:>7} {:>6} {:>9} {:>10}  {}\n", head, "GB/s", "x roof", "(95%)", "peak RSS", "verified");
  for (const auto& j : rep.jobs) {
    std::string row = fmt::format("{:<14} {:<6} {:>8.3f}", to_string(j.strategy), to_string(j.layout), j.stats.total_s);
    for (const Phase p : phases) row += fmt::format(" {:>7.3f}", j.stats.seconds[int(p)]);
    fmt::print(out, "{} {:>7.2f} {:>6.2f} {:>9} {:>10}  {}\n", row, rep.input_GBps(j), j.kernel_roof_fraction,
               j.roof_interval_text(), format_bytes(j.peak_rss_bytes), verified_text(rep, j));
  }
}

// Each phase's share of the fastest job's busy time (those that round to
// 0% left out), and the multiply's: all a faster kernel (a GPU) could save.
std::string where_the_time_goes(const RunReport& rep) {
  const TimeShares shares = rep.time_shares();
  if (!shares.job) return "";
  std::string phases;
  for (int p = 0; p < phase_count; ++p)
    if (Phase(p) == Phase::kernel || shares.share(Phase(p)) >= 0.005)
      phases += fmt::format("{}{} {:.0f}%", phases.empty() ? "" : ", ", to_string(Phase(p)), 100 * shares.share(Phase(p)));
  const double kernel = 100 * shares.share(Phase::kernel);
  const std::string could = fmt::format("; a faster kernel could save at most {:.0f}%", kernel),
                    saves = fmt::format("; a faster kernel saves at most {:.0f}%", kernel);
  const std::string job = job_name(*shares.job);
  return fitted({fmt::format("where the time goes ({}, busy time): {}{}", job, phases, could),
                 fmt::format("where the time goes ({}, busy time): {}{}", job, phases, saves),
                 fmt::format("where the time goes ({}): {}{}", job, phases, saves),
                 fmt::format("where the time goes: {}{}", phases, saves)});
}

void print_ranks(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\n{} ranks ({} on rank 0's node): each job's time is its slowest rank's\n", rep.ranks,
             rep.ranks_on_node);
  for (const auto& j : rep.jobs)
    if (!j.per_rank.empty())
      fmt::print(out, "  {}: slowest rank {}, load balance {:.2f} (slowest / mean)\n", job_name(j), j.slowest_rank(),
                 j.load_balance());
}

// First use's line (app/FirstUse.cpp), said once, in the run that
// measured: whole where it fits; else its choices without the path or the
// why, wrapped after a comma where still too long (each walk's count per
// side of 28 dates: 143 columns), onto lines indented two spaces. The
// summary's next line is blank (print_jobs), which ends it for readers.
void print_first_use(const std::string& u, std::ostream& out) {
  const std::string head = "first use: ";
  if (head.size() + u.size() <= summary_width) {
    fmt::print(out, "{}{}\n", head, u);
    return;
  }
  // The choices end at their parenthesis, or where "; measured twice, ..." begins inside it.
  const std::size_t close = u.find("), ") == std::string::npos ? u.size() : u.find("), ") + 1;
  const std::size_t twice = u.find("; measured twice");
  const std::string choices = twice < close ? u.substr(0, twice) + ")" : u.substr(0, close);
  const bool kept = u.find("), recorded in ") != std::string::npos;
  const std::size_t ranks = u.rfind(" ranks measured)");  // " (2 ranks measured)": kept in the short form
  const std::string many = ranks == std::string::npos ? std::string() : u.substr(u.rfind(" (", ranks));
  std::string rest = head + choices + (kept ? ", recorded" : ", not recorded (the machine busy)") + many, indent;
  for (std::size_t cut; indent.size() + rest.size() > summary_width &&
                        (cut = rest.rfind(", ", summary_width - indent.size() - 1)) != std::string::npos && cut > 0;
       indent = "  ") {
    fmt::print(out, "{}{},\n", indent, rest.substr(0, cut));
    rest = rest.substr(cut + 2);
  }
  fmt::print(out, "{}\n", fitted({indent + rest}));
}

}  // namespace

std::string choice_of(const std::string& text, const std::string& stops) {
  std::string choice;
  int open = 0;
  for (const char c : text) {
    if (stops.find(c) != std::string::npos) break;
    open += c == '(' ? 1 : c == ')' ? -1 : 0;
    choice += c;
  }
  while (!choice.empty() && choice.back() == ' ') choice.pop_back();
  return choice + std::string(std::size_t(std::max(open, 0)), ')');
}

std::string verdict_text(const RunReport& rep) {
  const JobReport* best = rep.fastest();
  if (!best) return "";
  const double slowest_s = rep.slowest()->stats.total_s;
  const std::string by = rep.jobs.size() > 1 && best->stats.total_s > 0
                             ? fmt::format(", {:.2f}x the slowest", slowest_s / best->stats.total_s)
                             : std::string();
  const std::string roof = best->kernel_roof_fraction > 0
                               ? fmt::format("; kernel {:.2f}x its copy roof", best->kernel_roof_fraction)
                               : std::string();
  const std::string start = fmt::format("verdict: {} fastest, {:.3f} s{}{}; output ", job_name(*best),
                                        best->stats.total_s, by, roof);
  return rep.verified ? fitted({start + "verified bit for bit", start + "verified"})
                      : fitted({start + "not verified ([run] verify = true checks it)", start + "not verified"});
}

void print_run_summary(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\n{}\n{}\n{}\n", header(rep), input_line(rep), output_line(rep));
  if (!rep.first_use.empty()) print_first_use(rep.first_use, out);
  print_jobs(rep, out);
  if (rep.ranks > 1) print_ranks(rep, out);
  fmt::print(out, "\n");
  if (const std::string where = where_the_time_goes(rep); !where.empty()) fmt::print(out, "{}\n", where);
  for (const auto& j : rep.jobs)
    if (j.resumed_blocks > 0)
      fmt::print(out, "{}\n", fitted({fmt::format("resumed: {} of {}'s {} blocks were on disk from a run that "
                                                  "stopped; its figures are this run's part",
                                                  j.resumed_blocks, job_name(j), rep.plan(j.layout).blocks.size())}));
  if (const std::string verdict = verdict_text(rep); !verdict.empty()) fmt::print(out, "{}\n", verdict);
  fmt::print(out, "(--explain: why each choice, flat's walk, every phase and what each column means)\n");
}

}  // namespace cvest::app
