#include "app/tune/TuneReads.hpp"

#include "app/run/RunDeck.hpp"
#include "core/Errors.hpp"
#include "io/input/Generator.hpp"
#include "io/os/TempFiles.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace cvest::app {

namespace {

// Its pages dropped from the page cache (clean: the generator syncs it).
void drop_from_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw IoError(path + ": cannot open it to measure reads: " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A deck of one job (flat on LayoutRight) from `input` to `output`.
Deck tune_deck(const std::string& input, const std::string& output, bool direct_reads, bool direct_writes) {
  Deck deck;
  deck.path = "cvest tune";
  deck.input.file = input;
  deck.input.direct = direct_reads ? DirectMode::on : DirectMode::off;
  deck.output.file = output;
  deck.output.overwrite = true;
  deck.output.journal = false;
  deck.output.direct = direct_writes ? DirectMode::on : DirectMode::off;
  return deck;
}

}  // namespace

void measure_reads(const std::string& folder, double bytes, int repeats, WriteModeRecord& record,
                   std::ostream& progress) {
  // Dates of up to 1,000,000 ids x 5 columns of doubles; at least one.
  const double values = std::max(1.0, bytes / 8 / 5);
  GenerateSpec spec;
  spec.cols = 5;
  spec.ids = Index(std::clamp(values, 1.0, 1e6));
  spec.dates = std::max<Index>(1, Index(values / double(spec.ids)));
  // Fresh unpredictable names of this run's own (as a run's temporary
  // files: a killed tune's are removed by the next), removed on a signal and
  // at the end; nothing another user or run has in the folder is touched.
  const std::string input_name = (fs::path(folder) / "cvest-tune-in.h5").string();
  const std::string output_name = (fs::path(folder) / "cvest-tune-out.h5").string();
  io::clean_up_after_killed_runs(input_name);
  io::clean_up_after_killed_runs(output_name);
  const std::string input = io::temp_path_for(input_name), output = io::temp_path_for(output_name);
  const io::TempFileGuard input_guard(input), output_guard(output);
  struct Remove {
    std::string a, b;
    ~Remove() {
      std::error_code ec;
      fs::remove(a, ec);
      fs::remove(b, ec);
    }
  } remove{input, output};
  io::generate_input(input, spec, false);
  const double cube = double(spec.dates * spec.ids * spec.cols) * 8;
  std::ostringstream quiet;
  for (int r = 0; r < repeats; ++r)
    for (const bool direct : {r % 2 == 0, r % 2 != 0}) {
      std::error_code ec;
      fs::remove(output, ec);
      drop_from_cache(input);
      wait_until_idle(folder);
      const auto start = std::chrono::steady_clock::now();
      try {
        run_deck(tune_deck(input, output, direct, record.direct()), quiet);
      } catch (const IoError& e) {
        throw IoError(std::string("cvest tune: measuring reads: ") + e.what());
      } catch (const InputError& e) {
        throw InputError(std::string("cvest tune: measuring reads: ") + e.what());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      quiet.str("");
      (direct ? record.read_direct_s : record.read_buffered_s).push_back(s);
      fmt::print(progress, "  read {}/{}: cvest run, input {} {:.2f} s ({:.2f} GB/s in)\n", r + 1, repeats,
                 direct ? "past the page cache" : "through it", s, cube / s / 1e9);
      progress.flush();
    }
}

}  // namespace cvest::app
