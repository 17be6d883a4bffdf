#include "app/run/ReportFormats.hpp"

#include "app/run/RunSummary.hpp"
#include "core/FlatRun.hpp"
#include "core/Policies.hpp"
#include "core/Version.hpp"
#include "io/os/Disk.hpp"
#include "io/os/WholeFile.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

namespace cvest::app {

namespace {


// A job's block shape; "/ids" where its kernels ran a tile of the block at a time.
std::string block_text(const BlockPlan& plan, Index kernel_ids) {
  std::string text = fmt::format("{}x{}", plan.block_dates, plan.block_ids);
  if (kernel_ids > 0 && kernel_ids < plan.block_ids) text += fmt::format("/{}", kernel_ids);
  return text;
}

// One line per job: its pipeline, block, phases, GB/s and roof.
void print_jobs(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\n{:<15} {:<6} {:<7} {:<12} {:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>6} {:>9} {:>9}  {}\n",
             "strategy", "layout", "prec", "pipeline", "block", "total s", "read", "h2d", "kernel", "d2h", "write",
             "GB/s in", "roof", "k.roof", "(95%)", "peak RSS", "output");
  for (const auto& j : rep.jobs) {
    const auto& st = j.stats;
    const BlockPlan& plan = rep.plan(j.layout);
    const std::string pipeline = j.pipeline == PipelineKind::per_thread
                                     ? fmt::format("per_thread:{}", j.pipeline_threads)
                                     : std::string(to_string(j.pipeline));
    fmt::print(out, "{:<15} {:<6} {:<7} {:<12} {:>12} {:>8.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.2f} {:>7.1f} {:>6.2f} {:>9} {:>9}  {}\n",
               to_string(j.strategy), to_string(j.layout), to_string(j.precision), pipeline,
               block_text(plan, j.kernel_ids), st.total_s, st.seconds[int(Phase::read)],
               st.seconds[int(Phase::h2d)], st.seconds[int(Phase::kernel)], st.seconds[int(Phase::d2h)],
               st.seconds[int(Phase::write)], rep.input_GBps(j), j.roof_GBps, j.kernel_roof_fraction, j.roof_interval_text(),
               format_bytes(j.peak_rss_bytes), j.wrote_output ? "written" : "matches");
  }
}

void print_ranks(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\n{} ranks ({} on rank 0's node): each job's time is its slowest rank's, its busy seconds and bytes "
                  "the ranks' sums, GB/s in all ranks' input over that time\n", rep.ranks, rep.ranks_on_node);
  for (const auto& j : rep.jobs) {
    if (j.per_rank.empty()) continue;
    std::string seconds, blocks;
    for (const auto& r : j.per_rank) {
      seconds += fmt::format(" {:.3f}", r.total_s);
      blocks += fmt::format(" {}", r.blocks);
    }
    fmt::print(out, "{}/{}: slowest rank {}, load balance {:.2f} (slowest / mean); seconds by rank{}; blocks by "
                    "rank{}{}\n", to_string(j.strategy), to_string(j.layout), j.slowest_rank(), j.load_balance(),
               seconds, blocks,
               j.parts_stored_s > 0 ? fmt::format("; rank 0 stored the others' compressed chunks in {:.3f} s",
                                                  j.parts_stored_s)
                                    : std::string());
  }
}

// The user's question, answered from the fastest job's own phases: how much
// of the work a faster kernel (a GPU) could take away at most.
void print_where_the_time_goes(const RunReport& rep, std::ostream& out) {
  const TimeShares shares = rep.time_shares();
  if (!shares.job) return;
  const auto& sec = shares.seconds;
  const double kernel = sec[int(Phase::kernel)];
  const std::string warmed =
      std::abs(kernel - shares.kernel_as_run) >= 0.0005
          ? fmt::format(" ({:.3f} as run: the calls right after a roof copy ran from the caches it filled; counted "
                        "at the others' speed)", shares.kernel_as_run)
          : std::string();
  fmt::print(out,
             "\nwhere the time goes ({}/{}, the fastest job, busy seconds): read {:.3f}, h2d {:.3f}, kernel {:.3f}{}, "
             "d2h {:.3f}, write {:.3f}; the multiply is {:.0f}% of it{}, so a faster kernel could save at most "
             "that\n",
             to_string(shares.job->strategy), to_string(shares.job->layout), sec[int(Phase::read)],
             sec[int(Phase::h2d)], kernel, warmed, sec[int(Phase::d2h)], sec[int(Phase::write)],
             100 * kernel / shares.busy,
             rep.build.backend == "Cuda"
                 ? fmt::format(" and host-device copies {:.0f}%",
                               100 * (sec[int(Phase::h2d)] + sec[int(Phase::d2h)]) / shares.busy)
                 : std::string());
}

}  // namespace

void print_run_table(const RunReport& rep, std::ostream& out) {
  fmt::print(out, "\ncvest run {}  {} x {} x {}  backend {} ({} threads), budget {}\n", rep.deck, rep.T, rep.N,
             rep.K, rep.build.backend, rep.build.threads, format_bytes(double(rep.memory_budget)));
  fmt::print(out, "input: {}\n", to_text(rep.input_storage));
  if (!rep.input_reads.empty()) fmt::print(out, "input: read {}\n", rep.input_reads);
  std::string ahead;  // the jobs whose threads read ahead
  for (const auto& j : rep.jobs)
    if (j.read_ahead)
      ahead += fmt::format("{}{}/{}", ahead.empty() ? "" : ", ", to_string(j.strategy), to_string(j.layout));
  if (!ahead.empty())
    fmt::print(out, "input: each per-thread pipeline thread reads its next block ahead, on a helper, while it "
                    "computes and writes the one before (two requests at the disk a thread; CVEST_READ_AHEAD=0: "
                    "one): {}\n", ahead);
  if (!rep.output_writes.empty()) fmt::print(out, "output: written {}\n", rep.output_writes);
  if (!rep.first_use.empty()) fmt::print(out, "first use: {}\n", rep.first_use);
  if (policy::on_host<Kokkos::DefaultExecutionSpace>)
    fmt::print(out, "flat's runs on the host: {}\n", policy::flat_run_text(8));
  for (const auto& p : rep.plans)
    fmt::print(out, "{} blocks: {} of up to {} dates x {} ids\n", kokkos_name(p.layout),
               p.blocks.size(), p.block_dates, p.block_ids);
  print_jobs(rep, out);
  if (rep.ranks > 1) print_ranks(rep, out);
  fmt::print(out, "\nblock: dates x ids per block (/ids: computed a tile of that many ids at a time, LayoutLeft in the "
                  "per-thread pipeline); a kernel call's bytes: its discount and multBy rows read, its cv written; "
                  "roof: GB/s of the same bytes copied with the kernel's stores, its multBy rows read, for every "
                  "other block: a block computed where it was read (LayoutRight on the host) has its discount copied "
                  "into its cv in the kernel's place, from the caches as the reads left them, paired with the kernel "
                  "of the thread's block before; otherwise its cv into its consumed discount right after its kernel; "
                  "on LayoutRight on the host in flat's walk, multBy read beside the copy as flat's kernel reads it; "
                  "k.roof: the median over those pairs, all the job's runs together, of the kernel's GB/s over the "
                  "copy's; (95%): the interval that holds that median with 95% confidence, from the pairs' own "
                  "spread (order statistics; - under 6 pairs)\n");
  print_where_the_time_goes(rep, out);
  for (const auto& j : rep.jobs)
    if (j.resumed_blocks > 0)
      fmt::print(out, "\nresumed: {} of {}/{}'s {} blocks were on disk from a run that stopped (its journal, or "
                      "its seal: the whole output); this run wrote the rest, and its figures are that work's\n", j.resumed_blocks, to_string(j.strategy),
                 to_string(j.layout), rep.plan(j.layout).blocks.size());
  if (rep.verified) fmt::print(out, "\nverified: {} equals multBy * discount bit for bit\n", rep.output);
  if (const std::string verdict = verdict_text(rep); !verdict.empty()) fmt::print(out, "{}\n", verdict);
}

void print_plan(const RunReport& rep, std::ostream& out) {
  const std::size_t es = rep.jobs.empty() ? 8 : element_size(rep.jobs.front().precision);
  const double out_bytes = double(rep.T * rep.N * rep.K) * double(es);
  fmt::print(out, "\ncvest run {} --plan  (nothing was written)\n", rep.deck);
  fmt::print(out, "input   {}: {} x {} x {}; {}{}\n", rep.input, rep.T, rep.N, rep.K, to_text(rep.input_storage),
             rep.generated_input_bytes > 0
                 ? fmt::format("; to be generated, {} (it and the output fit the disk together)",
                               format_bytes(rep.generated_input_bytes))
                 : std::string());
  for (const auto& p : rep.plans)
    fmt::print(out, "blocks  {}: {} of up to {} dates x {} ids; {} of buffers within a budget of {}{}\n",
               kokkos_name(p.layout), p.blocks.size(), p.block_dates, p.block_ids,
               format_bytes(double(p.buffer_bytes)), format_bytes(double(rep.memory_budget)),
               p.multby_resident ? "; multBy read once and kept" : "");
  const double free = io::free_space(rep.output);
  fmt::print(out, "output  {}: {} {}, chunks of {} ids{}\n", rep.output,
             rep.output_compression.kind == Compression::none ? std::string("uncompressed,")
                                                              : to_text(rep.output_compression) + ", at most",
             format_bytes(out_bytes), rep.output_chunk_ids,
             free < 0 ? std::string() : fmt::format("; {} free there", format_bytes(free)));
  if (rep.ranks > 1)
    for (std::size_t p = 0; p < rep.plans.size(); ++p) {
      std::string shares;
      for (const Range& r : rep.rank_blocks[p]) shares += fmt::format(" [{}, {})", r.begin, r.end);
      fmt::print(out, "ranks   {}: {} ranks, blocks by rank{}\n", kokkos_name(rep.plans[p].layout), rep.ranks, shares);
    }
  for (const auto& j : rep.jobs)
    fmt::print(out, "job     {}/{} {}: {}\n", to_string(j.strategy), to_string(j.layout), to_string(j.precision),
               j.pipeline == PipelineKind::per_thread
                   ? fmt::format("per_thread pipeline, {} threads{}", j.pipeline_threads,
                                 j.read_ahead ? ", each reading its next block ahead (the input is read past the "
                                                "page cache)"
                                              : "")
                   : std::string("overlapped pipeline"));
}

namespace {

// Each layout's block plan and its blocks by rank.
nlohmann::json plans_json(const RunReport& rep) {
  nlohmann::json plans;
  for (std::size_t pi = 0; pi < rep.plans.size(); ++pi) {
    const BlockPlan& p = rep.plans[pi];
    auto& plan = plans[std::string(to_string(p.layout))];
    plan["rank_blocks"] = nlohmann::json::array();  // rank r runs blocks [begin, end)
    for (const Range& r : rep.rank_blocks[pi]) plan["rank_blocks"].push_back({r.begin, r.end});
    plan["block_dates"] = p.block_dates;
    plan["block_ids"] = p.block_ids;
    plan["buffer_bytes"] = p.buffer_bytes;
    plan["multby_resident"] = p.multby_resident;
    plan["blocks"] = nlohmann::json::array();
    for (const auto& b : p.blocks)
      plan["blocks"].push_back({{"dates", {b.dates.begin, b.dates.end}}, {"ids", {b.ids.begin, b.ids.end}}});
  }
  return plans;
}

// A distributed job's figures by rank.
void add_ranks_json(const JobReport& job, nlohmann::json& jj) {
  jj["slowest_rank"] = job.slowest_rank();
  jj["load_balance"] = job.load_balance();
  jj["parts_stored_s"] = job.parts_stored_s;
  jj["per_rank"] = nlohmann::json::array();
  for (std::size_t r = 0; r < job.per_rank.size(); ++r) {
    const RankStats& rs = job.per_rank[r];
    nlohmann::json jr{{"rank", r}, {"total_s", rs.total_s}, {"blocks", rs.blocks}, {"peak_rss_bytes", rs.peak_rss_bytes}};
    for (int p = 0; p < phase_count; ++p) {
      jr["seconds"][std::string(to_string(Phase(p)))] = rs.seconds[p];
      jr["bytes"][std::string(to_string(Phase(p)))] = rs.bytes[p];
    }
    jj["per_rank"].push_back(jr);
  }
}

nlohmann::json job_json(const RunReport& rep, const JobReport& job) {
  nlohmann::json jj;
  jj["strategy"] = to_string(job.strategy);
  jj["layout"] = to_string(job.layout);
  jj["precision"] = to_string(job.precision);
  jj["wrote_output"] = job.wrote_output;
  jj["runs"] = job.runs;
  jj["pipeline"] = to_string(job.pipeline);
  jj["pipeline_threads"] = job.pipeline_threads;
  jj["read_ahead"] = job.read_ahead;
  jj["peak_rss_bytes"] = job.peak_rss_bytes;
  jj["kernel_roof_fraction"] = job.kernel_roof_fraction;
  jj["kernel_roof_interval"] = job.kernel_roof_interval.exists
                                   ? nlohmann::json{job.kernel_roof_interval.low, job.kernel_roof_interval.high}
                                   : nlohmann::json(nullptr);
  jj["kernel_roof_fraction_min"] = job.kernel_roof_min;
  jj["kernel_roof_fraction_max"] = job.kernel_roof_max;
  jj["roof"] = {{"copy_GBps", job.roof_GBps},
                {"pairs", roof_pairs::kernel_fractions(job.roof_calls).size()},
                {"kernel_calls_copied", job.stats.roof.size()},
                {"measured", "for every other kernel call, on the thread(s) that ran it, with the same stores, its "
                             "multBy rows read: a block computed where it was read (LayoutRight on the host) has its "
                             "discount copied into its cv in the kernel's place, paired with the thread's kernel "
                             "call before; otherwise its cv into its consumed discount right after the call; on "
                             "LayoutRight on the host in flat's walk, multBy read beside the copy as flat's kernel "
                             "reads it; bytes: discount and multBy rows read + cv written, as the kernel's"},
                {"kernel_after_roof_seconds", job.stats.kernel_after_roof_s},
                {"kernel_seconds_unwarmed", job.stats.kernel_seconds_unwarmed()}};
  const BlockPlan& plan = rep.plan(job.layout);
  jj["block_dates"] = plan.block_dates;
  jj["block_ids"] = plan.block_ids;
  jj["kernel_ids"] = job.kernel_ids;
  jj["blocks"] = plan.blocks.size();
  jj["seconds"]["total"] = job.stats.total_s;
  for (int p = 0; p < phase_count; ++p) {
    const std::string name(to_string(Phase(p)));
    jj["seconds"][name] = job.stats.seconds[p];
    jj["bytes"][name] = job.stats.bytes[p];
    jj["GBps"][name] = job.stats.seconds[p] > 0 ? job.stats.bytes[p] / job.stats.seconds[p] / 1e9 : 0.0;
  }
  if (!job.per_rank.empty()) add_ranks_json(job, jj);
  jj["resumed_blocks"] = job.resumed_blocks;
  jj["chunks_decoded"] = job.chunks_decoded;
  jj["chunks_decoded_distinct"] = job.chunks_distinct;
  jj["timeline"] = nlohmann::json::array();
  for (const auto& span : job.stats.timeline)
    jj["timeline"].push_back({{"block", span.block}, {"phase", to_string(span.phase)}, {"begin_s", span.begin_s},
                              {"end_s", span.end_s}});
  return jj;
}

}  // namespace

nlohmann::json to_json(const RunReport& rep) {
  nlohmann::json j;
  j["cvest_version"] = CVEST_VERSION;
  j["backend"] = rep.build.backend;
  j["kokkos_version"] = rep.build.kokkos_version;
  j["threads"] = rep.build.threads;
  j["machine"] = machine_json(rep.build);
  j["deck"] = rep.deck;
  j["input"] = rep.input;
  j["output"] = rep.output;
  j["output_compression"] = to_string(rep.output_compression.kind);
  j["output_gzip_level"] = rep.output_compression.kind == Compression::gzip ? rep.output_compression.gzip_level : 0;
  j["output_compression_settings"] = to_text(rep.output_compression);
  j["output_chunk_ids"] = rep.output_chunk_ids;
  j["output_writes"] = rep.output_writes;
  j["input_reads"] = rep.input_reads;
  j["input_storage"] = {{"layout", to_string(rep.input_storage.layout)},
                        {"chunk", rep.input_storage.chunk.empty() ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(rep.input_storage.chunk)},
                        {"filters", rep.input_storage.filters},
                        {"read_by", to_string(rep.input_storage.read_by)},
                        {"held", rep.input_storage.held},
                        {"held_part_ids", rep.input_storage.held_part_ids}};
  j["shape"] = {{"dates", rep.T}, {"ids", rep.N}, {"cols", rep.K}};
  j["memory_budget_bytes"] = rep.memory_budget;
  j["ranks"] = rep.ranks;
  j["ranks_on_node"] = rep.ranks_on_node;
  j["block_plans"] = plans_json(rep);
  j["verified"] = rep.verified;
  j["jobs"] = nlohmann::json::array();
  for (const auto& job : rep.jobs) j["jobs"].push_back(job_json(rep, job));
  return j;
}

std::string to_csv(const RunReport& rep) {
  std::ostringstream s;
  s << "strategy,layout,precision,wrote_output,total_s";
  for (int p = 0; p < phase_count; ++p) s << ',' << to_string(Phase(p)) << "_s";
  for (int p = 0; p < phase_count; ++p) s << ',' << to_string(Phase(p)) << "_bytes";
  s << ",peak_rss_bytes,kernel_roof_fraction,roof_GBps,dates,ids,cols,blocks,block_dates,block_ids,pipeline,"
       "pipeline_threads,ranks,slowest_rank,load_balance,kernel_ids,kernel_roof_pairs,kernel_roof_low,"
       "kernel_roof_high\n";
  for (const auto& j : rep.jobs) {
    s << to_string(j.strategy) << ',' << to_string(j.layout) << ',' << to_string(j.precision) << ','
      << (j.wrote_output ? "true" : "false") << ',' << fmt::format("{:.6f}", j.stats.total_s);
    for (int p = 0; p < phase_count; ++p) s << ',' << fmt::format("{:.6f}", j.stats.seconds[p]);
    for (int p = 0; p < phase_count; ++p) s << ',' << fmt::format("{:.0f}", j.stats.bytes[p]);
    const BlockPlan& plan = rep.plan(j.layout);
    s << ',' << fmt::format("{:.0f}", j.peak_rss_bytes) << ',' << fmt::format("{:.4f}", j.kernel_roof_fraction) << ','
      << fmt::format("{:.3f}", j.roof_GBps) << ',' << rep.T << ',' << rep.N << ',' << rep.K << ','
      << plan.blocks.size() << ',' << plan.block_dates << ',' << plan.block_ids << ',' << to_string(j.pipeline) << ','
      << j.pipeline_threads << ',' << rep.ranks << ',' << j.slowest_rank() << ',' << fmt::format("{:.3f}", j.load_balance())
      << ',' << j.kernel_ids << ',' << roof_pairs::kernel_fractions(j.roof_calls).size() << ','
      << (j.kernel_roof_interval.exists ? fmt::format("{:.4f},{:.4f}", j.kernel_roof_interval.low,
                                                      j.kernel_roof_interval.high)
                                        : std::string(","))
      << '\n';
  }
  return s.str();
}

void write_report_file(const std::string& path, const std::string& text) {
  io::write_whole_file(path, text, "report");
}

}  // namespace cvest::app
