// Decks run end to end: the first job writes, later jobs are checked against
// it; generated inputs fit the disk first; chunks HDF5 reads are read once;
// random shapes, storages, budgets and pipelines.
#include "io/os/Disk.hpp"
#include "io/input/Generator.hpp"
#include "io/input/Input.hpp"
#include "io/output/OutputFile.hpp"
#include "io/output/OutputLock.hpp"
#include "app/run/ReportFormats.hpp"
#include "app/run/RunDeck.hpp"
#include "app/run/Verify.hpp"
#include "JobDirs.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <fmt/format.h>

using namespace cvest;
using namespace cvest::io;
using namespace cvest::app;
namespace fs = std::filesystem;
using cvest::test::fresh_dir;

TEST_CASE("a deck's strategy x layout product runs file to file and verifies", "[job]") {
  const auto precision = GENERATE(std::string("double"), std::string("float"));
  const auto dir = fresh_dir("product_" + precision);
  std::ofstream(dir / "deck.toml") << R"(
[input]
file = "in.h5"
generate = { dates = 9, ids = 3001, cols = 5, seed = 3, precision = ")" << precision << R"(" }
[output]
file = "out/cv.h5"
[run]
strategy = ["flat", "per_id", "team"]
layout = "all"
memory_budget = "1MiB"
verify = true
[report]
json = "report.json"
csv = "report.csv"
)";
  const auto deck = load_deck((dir / "deck.toml").string());
  std::ostringstream progress;
  const auto report = run_deck(deck, progress);
  REQUIRE(report.jobs.size() == 6);
  CHECK(report.jobs[0].wrote_output);
  for (std::size_t j = 1; j < report.jobs.size(); ++j) CHECK_FALSE(report.jobs[j].wrote_output);
  CHECK(report.verified);
  REQUIRE(report.plans.size() == 2);  // one per layout
  CHECK(report.plan(LayoutKind::right).blocks.size() > 1);
  CHECK(report.plan(LayoutKind::left).blocks.size() > 1);
  CHECK(report.jobs[0].precision == precision_from_name(precision));
  const auto json = to_json(report);
  CHECK(json["jobs"].size() == 6);
  CHECK(json["jobs"][0]["seconds"].contains("h2d"));
  CHECK(json["jobs"][0]["timeline"].size() == 5 * report.plan(report.jobs[0].layout).blocks.size());
  CHECK(json["jobs"][0]["blocks"] == report.plan(report.jobs[0].layout).blocks.size());
  CHECK(json["block_plans"].contains("left"));
  // where it ran: this machine's CPUs and memory, a host name
  CHECK(json["output_compression"] == "none");
  CHECK(json["output_gzip_level"] == 0);
  CHECK(json["output_chunk_ids"].get<Index>() == report.output_chunk_ids);
  CHECK(report.output_chunk_ids > 0);
  // generated inputs are (1, ids, K) chunks, unfiltered: read with pread
  CHECK(json["input_storage"]["layout"] == "chunked");
  CHECK(json["input_storage"]["chunk"].size() == 3);
  CHECK(json["input_storage"]["filters"].empty());
  CHECK(json["input_storage"]["read_by"] == "pread");
  CHECK(progress.str().find("chunks (1, ") != std::string::npos);
  CHECK(json["machine"]["cpus"].get<int>() >= 1);
  CHECK(json["machine"]["memory_bytes"].get<double>() > 0);
  CHECK_FALSE(json["machine"]["host"].get<std::string>().empty());
  CHECK(to_csv(report).find("flat,left," + precision) != std::string::npos);
  // the table ends with the share a faster kernel could save, from the fastest job
  std::ostringstream table;
  print_run_table(report, table);
  CHECK(table.str().find("the fastest job, busy seconds): read ") != std::string::npos);
  // (a device build names the host-device copies' share between the two)
  CHECK(std::regex_search(table.str(), std::regex("the multiply is [0-9]+% of it( and host-device copies [0-9]+%)?, so "
                                                  "a faster kernel could save at most that")));
  // an existing output is refused without overwrite
  CHECK_THROWS_WITH(run_deck(deck, progress), Catch::Contains("output exists"));
}

TEST_CASE("a job's k.roof pools the pairs of all its runs, with the interval that holds their median", "[job]") {
  // Three runs of 8 blocks in the overlapped pipeline: every other block
  // timed (roof_sampled), 4 pairs a run, 12 in all: enough for an interval
  // (6), which one run's 4 are not.
  const auto dir = fresh_dir("roof_pairs");
  std::ofstream(dir / "deck.toml") << R"(
[input]
file = "in.h5"
generate = { dates = 8, ids = 2000, cols = 5, seed = 5 }
[output]
file = "out/cv.h5"
[run]
strategy = "flat"
layout = ["right", "left"]
max_block = 80000
pipeline = "overlapped"
repeats = 3
)";
  std::ostringstream progress;
  const auto report = run_deck(load_deck((dir / "deck.toml").string()), progress);
  const auto json = to_json(report);
  const std::string csv = to_csv(report);
  std::ostringstream table;
  print_run_table(report, table);
  CHECK(table.str().find("(95%)") != std::string::npos);
  CHECK(csv.find(",kernel_roof_pairs,kernel_roof_low,kernel_roof_high\n") != std::string::npos);
  for (std::size_t j = 0; j < report.jobs.size(); ++j) {
    const JobReport& job = report.jobs[j];
    CAPTURE(j);
    REQUIRE(report.plan(job.layout).blocks.size() == 8);
    // every run's pairs, not the median run's alone
    REQUIRE(job.roof_calls.size() == 12);
    CHECK(job.stats.roof.size() == 4);
    std::vector<double> ratios;
    for (const auto& c : job.roof_calls) ratios.push_back(c.copy_s / c.kernel_s);
    CHECK(job.kernel_roof_fraction == median(ratios));
    std::sort(ratios.begin(), ratios.end());
    REQUIRE(job.kernel_roof_interval.exists);  // the 3rd smallest and 3rd largest of 12
    CHECK(job.kernel_roof_interval.low == ratios[2]);
    CHECK(job.kernel_roof_interval.high == ratios[9]);
    CHECK(job.kernel_roof_min <= job.kernel_roof_max);
    const auto& jj = json["jobs"][j];
    CHECK(jj["roof"]["pairs"] == 12);
    CHECK(jj["kernel_roof_fraction"].get<double>() == job.kernel_roof_fraction);
    CHECK(jj["kernel_roof_interval"][0].get<double>() == ratios[2]);
    CHECK(jj["kernel_roof_interval"][1].get<double>() == ratios[9]);
    // the table's row: k.roof, then its interval
    CHECK(table.str().find(fmt::format("{:.2f} {:.2f}-{:.2f}", job.kernel_roof_fraction, ratios[2], ratios[9])) !=
          std::string::npos);
  }
  // One run's 4 pairs: no interval; the table says so with a dash.
  JobReport one = report.jobs[0];
  one.roof_calls = one.stats.roof;
  one.summarize_roof();
  CHECK_FALSE(one.kernel_roof_interval.exists);
  CHECK(one.kernel_roof_fraction > 0);
}

TEST_CASE("an input to generate and its output must fit the disk together before either is written", "[job]") {
  const auto dir = fresh_dir("disk_together");
  const double free_here = free_space((dir / "in.h5").string());
  REQUIRE(free_here > 0);
  // Doubles for about 0.6 of the free space in each file: either fits alone.
  const Index ids = Index(0.6 * free_here / (8.0 * 5 * 100));
  Deck deck;
  deck.path = (dir / "deck.toml").string();
  deck.input.file = (dir / "in.h5").string();
  deck.input.generate = GenerateSpec{100, ids, 5, 1, Precision::f64};
  deck.output.file = (dir / "out" / "cv.h5").string();
  std::ostringstream progress;
  CHECK_THROWS_WITH(run_deck(deck, progress, true),
                    Catch::Contains("in.h5 and ") && Catch::Contains("cv.h5: need ") && Catch::Contains("together"));
  CHECK_FALSE(fs::exists(dir / "in.h5"));
  CHECK_FALSE(fs::exists(dir / "out"));
  // A float output leaves room; a compressed one is counted at its plain
  // size (a chunk no filter shrinks is stored as it is), so refused the same.
  deck.run.precision = Precision::f32;
  deck.input.generate->dates = 90;
  CHECK_NOTHROW(run_deck(deck, progress, true));
  deck.run.precision.reset();
  deck.input.generate->dates = 100;
  deck.output.compression.kind = Compression::gzip;
  CHECK_THROWS_WITH(run_deck(deck, progress, true), Catch::Contains("together"));
  CHECK_FALSE(fs::exists(dir / "in.h5"));
}

TEST_CASE("chunks HDF5 reads are read once: blocks inside a row of them, a cache that holds it", "[job]") {
  // Dask's to_hdf5 writes chunks of all dates and ~128 MiB ((100, 33554, 5)
  // for 100 x 400000 x 5): too large for cvest's decoding scratch, so HDF5
  // reads them. Blocks one date thick across the ids inflated every chunk
  // once per block (with HDF5's w0 = 1 the cache instead kept every chunk:
  // 1.6 GB of RSS under a 1 GiB budget).
  quiet_hdf5_errors();
  const auto dir = fresh_dir("hdf5_rows");
  const hsize_t T = 12, N = 5000, K = 5, chunk[3] = {12, 1200, 5};  // 576 kB chunks, all dates
  std::vector<double> m(N * K), d(T * N * K);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = 1.0 + double(j % 7) / 8;
  for (std::size_t j = 0; j < d.size(); ++j) d[j] = std::ldexp(double(j % 1013) + 0.5, int(j % 9) - 4);
  {
    File f(H5Fcreate((dir / "in.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t dims[3] = {T, N, K}, mdims[2] = {N, K};
    Dataspace sp(H5Screate_simple(3, dims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr));
    PropList create(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create.get(), 3, chunk);
    H5Pset_deflate(create.get(), 1);
    Dataset dd(H5Dcreate2(f.get(), "discount", H5T_IEEE_F64LE, sp.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT));
    Dataset md(H5Dcreate2(f.get(), "multBy", H5T_IEEE_F64LE, ms.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(H5Dwrite(dd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data()) >= 0);
    REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
  }
  for (const std::string budget : {"4MiB", "1MiB"}) {  // a row fits half of it; it does not
    CAPTURE(budget);
    std::ofstream(dir / "deck.toml") << "[input]\nfile = \"in.h5\"\n[output]\nfile = \"cv.h5\"\noverwrite = true\n"
                                     << "[run]\nmemory_budget = \"" << budget << "\"\nlayout = \"all\"\nverify = true\n";
    std::ostringstream progress;
    const auto report = run_deck(load_deck((dir / "deck.toml").string()), progress);
    // 3 x 576 kB per thread does not fit an eighth of the budget: at 4 MiB
    // the chunks are held decoded, each decoded once; at 1 MiB not even
    // that fits beside the blocks, and HDF5 reads them
    const bool held = budget == "4MiB";
    CHECK(report.input_storage.read_by == (held ? ReadBy::decode : ReadBy::hdf5));
    CHECK(report.input_storage.held == held);
    for (const JobReport& job : report.jobs) {
      CHECK(job.chunks_decoded == (held ? 5u : 0u));  // 5000 ids in chunks of 1200, all 12 dates in each
      CHECK(job.chunks_distinct == job.chunks_decoded);
    }
    CHECK(report.verified);
    // id-major, and no block reaches into two chunks along the ids
    for (const BlockPlan& plan : report.plans)
      for (std::size_t k = 0; k < plan.blocks.size(); ++k) {
        const Block& b = plan.blocks[k];
        CHECK(b.ids.begin / 1200 == (b.ids.end - 1) / 1200);
        if (k > 0) CHECK(b.ids.begin >= plan.blocks[k - 1].ids.begin);
      }
    const bool warned = progress.str().find("one row of them") != std::string::npos;
    CHECK(warned == (budget == "1MiB"));
  }
}

namespace {
// One randomly drawn job: how its input is stored and how the deck runs it.
struct RandomCase {
  Index T, N, K;
  hid_t discount_type, multby_type;                  // file types, byte orders included
  std::optional<std::array<hsize_t, 3>> discount_chunk;  // none: contiguous
  std::optional<std::array<hsize_t, 2>> multby_chunk;
  bool shuffle, deflate, multby_deflate;
  hsize_t userblock;  // bytes ahead of the HDF5 data, 0: none
  bool linked;        // discount in a file of its own, reached by an external link
};

std::string describe(const RandomCase& c, const Deck& d) {
  std::ostringstream s;
  s << c.T << "x" << c.N << "x" << c.K << " discount "
    << (c.discount_chunk ? fmt::format("chunks ({}, {}, {})", (*c.discount_chunk)[0], (*c.discount_chunk)[1],
                                       (*c.discount_chunk)[2])
                         : std::string("contiguous"))
    << (c.shuffle ? " shuffle" : "") << (c.deflate ? " deflate" : "") << " multBy "
    << (c.multby_chunk ? fmt::format("chunks ({}, {})", (*c.multby_chunk)[0], (*c.multby_chunk)[1])
                       : std::string("contiguous"))
    << (c.multby_deflate ? " deflate" : "") << (c.linked ? " discount linked" : "") << " userblock " << c.userblock
    << " types " << (H5Tequal(c.discount_type, H5T_IEEE_F64BE) > 0 ? "be64" : "")
    << H5Tget_size(c.discount_type) << "/" << H5Tget_size(c.multby_type) << "; budget " << d.run.memory_budget
    << " max_block " << (d.run.max_block ? std::to_string(*d.run.max_block) : std::string("default")) << " pipeline "
    << int(d.run.pipeline) << " output " << to_text(d.output.compression) << " chunk " << d.output.chunk_ids << " precision "
    << (d.run.precision ? std::string(to_string(*d.run.precision)) : std::string("input's"));
  for (const auto s_ : d.run.strategies) s << " " << to_string(s_);
  for (const auto l : d.run.layouts) s << " " << to_string(l);
  return s.str();
}
}  // namespace

// Whatever the input's storage (a user block and an external link too), the
// shape, the budget, the block cap, the pipeline, the strategies, layouts,
// precision and output storage, the file holds m * d bit for bit, read back
// through HDF5 alone. Seeded: a failure names its case and reproduces.
TEST_CASE("random shapes, storages, budgets and pipelines: every run is m * d bit for bit", "[job]") {
  quiet_hdf5_errors();
  std::mt19937_64 rng(20261130);
  const auto pick = [&](Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(rng); };
  const auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  int ran = 0, refused_budget = 0, per_thread_jobs = 0;
  for (int n = 0; n < 60; ++n) {
    RandomCase c{};
    c.T = pick(1, 7);
    c.N = coin(0.1) ? pick(1, 5) : pick(6, 3000);
    c.K = pick(1, 6);
    const hid_t types[] = {H5T_IEEE_F64LE, H5T_IEEE_F64LE, H5T_IEEE_F32LE, H5T_IEEE_F64BE};
    c.discount_type = types[pick(0, 3)];
    c.multby_type = coin(0.8) ? c.discount_type : types[pick(0, 3)];
    if (coin(0.75))
      c.discount_chunk = std::array<hsize_t, 3>{hsize_t(pick(1, c.T)), hsize_t(pick(1, c.N)), hsize_t(pick(1, c.K))};
    c.shuffle = c.discount_chunk && coin(0.4);
    c.deflate = c.discount_chunk && coin(0.6);
    if (coin(0.5)) c.multby_chunk = std::array<hsize_t, 2>{hsize_t(pick(1, c.N)), hsize_t(pick(1, c.K))};
    c.multby_deflate = c.multby_chunk && coin(0.5);
    c.userblock = coin(0.15) ? hsize_t(512) << pick(0, 3) : 0;
    c.linked = coin(0.15);

    const auto dir = fresh_dir("random_" + std::to_string(n));
    const Index NK = c.N * c.K, TNK = c.T * NK;
    std::vector<double> m(static_cast<std::size_t>(NK)), d(static_cast<std::size_t>(TNK));
    std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
    for (auto& v : m) v = std::ldexp(mantissa(rng), int(pick(-60, 60)));
    for (auto& v : d) v = std::ldexp(mantissa(rng), int(pick(-60, 60)));
    {
      PropList fcpl(H5Pcreate(H5P_FILE_CREATE));
      if (c.userblock) H5Pset_userblock(fcpl.get(), c.userblock);
      File f(H5Fcreate((dir / "in.h5").c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT));
      File linked;
      if (c.linked) {
        linked = File(H5Fcreate((dir / "discount.h5").c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT));
        REQUIRE(H5Lcreate_external("discount.h5", "discount", f.get(), "discount", H5P_DEFAULT, H5P_DEFAULT) >= 0);
      }
      const hsize_t ddims[3] = {hsize_t(c.T), hsize_t(c.N), hsize_t(c.K)}, mdims[2] = {hsize_t(c.N), hsize_t(c.K)};
      Dataspace ds(H5Screate_simple(3, ddims, nullptr)), ms(H5Screate_simple(2, mdims, nullptr));
      PropList dcreate(H5Pcreate(H5P_DATASET_CREATE)), mcreate(H5Pcreate(H5P_DATASET_CREATE));
      if (c.discount_chunk) H5Pset_chunk(dcreate.get(), 3, c.discount_chunk->data());
      if (c.shuffle) H5Pset_shuffle(dcreate.get());
      if (c.deflate) H5Pset_deflate(dcreate.get(), 1);
      if (c.multby_chunk) H5Pset_chunk(mcreate.get(), 2, c.multby_chunk->data());
      if (c.multby_deflate) H5Pset_deflate(mcreate.get(), 1);
      Dataset dd(H5Dcreate2((c.linked ? linked : f).get(), "discount", c.discount_type, ds.get(), H5P_DEFAULT,
                            dcreate.get(), H5P_DEFAULT));
      Dataset md(H5Dcreate2(f.get(), "multBy", c.multby_type, ms.get(), H5P_DEFAULT, mcreate.get(), H5P_DEFAULT));
      // Written as doubles; HDF5 rounds to a float file type, as h5py would.
      REQUIRE(H5Dwrite(dd.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data()) >= 0);
      REQUIRE(H5Dwrite(md.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data()) >= 0);
    }
    Deck deck;
    deck.path = (dir / "deck.toml").string();
    deck.input.file = (dir / "in.h5").string();
    deck.output.file = (dir / "out" / "cv.h5").string();
    deck.output.compression.kind = coin(0.3) ? Compression::gzip : Compression::none;
    deck.output.chunk_ids = coin(0.3) ? pick(1, c.N + 10) : 0;
    deck.run.strategies.clear();
    for (const auto& s : strategy_table)
      if (coin(0.35)) deck.run.strategies.push_back(s.id);
    if (deck.run.strategies.empty()) deck.run.strategies.push_back(strategy_table[std::size_t(pick(0, 6))].id);
    deck.run.layouts = coin(0.5) ? std::vector<LayoutKind>{LayoutKind::right, LayoutKind::left}
                                 : std::vector<LayoutKind>{coin(0.5) ? LayoutKind::right : LayoutKind::left};
    if (coin(0.3)) deck.run.precision = coin(0.5) ? Precision::f32 : Precision::f64;
    // From about two id rows' buffers to plenty.
    deck.run.memory_budget = std::size_t(coin(0.5) ? pick(2 * 10 * c.K * 8, 64 << 10) : pick(64 << 10, 8 << 20));
    if (coin(0.5)) deck.run.max_block = std::size_t(coin(0.5) ? 0 : pick(64, 16 << 10));
    const PipelineKind pipelines[] = {PipelineKind::automatic, PipelineKind::overlapped, PipelineKind::per_thread};
    deck.run.pipeline = pipelines[pick(0, 2)];
    deck.run.verify = coin(0.3);
    const auto what = describe(c, deck);
    CAPTURE(n, what);

    // NumPy's promotion: float32 only where both inputs are
    const bool f32_file = H5Tget_size(c.discount_type) == 4 && H5Tget_size(c.multby_type) == 4;
    const Precision precision = deck.run.precision.value_or(f32_file ? Precision::f32 : Precision::f64);
    std::ostringstream progress;
    RunReport report;
    try {
      report = run_deck(deck, progress);
    } catch (const InputError& e) {
      // Only a budget that cannot hold one id row, or per_thread asked for
      // where it does not apply (a team job, one thread, a tight budget).
      const std::string why = e.what();
      if (why.find("does not divide") != std::string::npos) {
        CHECK(deck.output.chunk_ids > 0);  // the deck's own output chunks, across the input's held cells
      } else if (why.find("does not apply") == std::string::npos) {
        CHECK_THAT(why, Catch::Contains("too small"));
        ++refused_budget;
      } else {
        CHECK(deck.run.pipeline == PipelineKind::per_thread);
      }
      continue;
    }
    ++ran;
    REQUIRE(report.jobs.size() == deck.run.strategies.size() * deck.run.layouts.size());
    for (const auto& job : report.jobs) {
      if (deck.run.pipeline != PipelineKind::automatic) CHECK(job.pipeline == deck.run.pipeline);
      per_thread_jobs += job.pipeline == PipelineKind::per_thread;
    }

    // What NumPy computes: each factor as stored (rounded to the file's type),
    // converted to the run's precision, multiplied in it.
    const auto stored = [](double v, hid_t type) { return H5Tget_size(type) == 4 ? double(float(v)) : v; };
    File f(H5Fopen(deck.output.file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Dataset out(H5Dopen2(f.get(), "cv", H5P_DEFAULT));
    std::size_t wrong = 0;
    Index first_wrong = -1;
    if (precision == Precision::f64) {
      std::vector<double> got(static_cast<std::size_t>(TNK));
      REQUIRE(H5Dread(out.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data()) >= 0);
      for (Index j = 0; j < TNK; ++j) {
        const double want = stored(m[std::size_t(j % NK)], c.multby_type) * stored(d[std::size_t(j)], c.discount_type);
        if (std::memcmp(&want, &got[std::size_t(j)], sizeof want) != 0 && wrong++ == 0) first_wrong = j;
      }
    } else {
      std::vector<float> got(static_cast<std::size_t>(TNK));
      REQUIRE(H5Dread(out.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data()) >= 0);
      for (Index j = 0; j < TNK; ++j) {
        const float want = float(m[std::size_t(j % NK)]) * float(d[std::size_t(j)]);
        if (std::memcmp(&want, &got[std::size_t(j)], sizeof want) != 0 && wrong++ == 0) first_wrong = j;
      }
    }
    CAPTURE(first_wrong);
    CHECK(wrong == 0);
  }
  CHECK(ran > 30);
  CHECK(refused_budget <= 3);  // budgets are drawn from about two id rows' buffers up
  const auto facts = build_facts();
  if (facts.backend == "OpenMP" && facts.threads >= 2) CHECK(per_thread_jobs > 0);
}
