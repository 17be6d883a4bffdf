// libFuzzer harness for opening an input file: HDF5's reading of the file's
// metadata (superblock, object headers, B-trees, filter pipelines) and
// cvest's checks of multBy and discount, then the first rows through the
// reader a run would use (pread, cvest's chunk decoders, or H5Dread of
// unfiltered data), in both precisions. A damaged file must end in InputError or IoError, as `cvest
// run` reports it; anything else escaping, a crash, a sanitizer report or a
// hang fails, and so do a write past a block buffer and an HDF5 object left
// open after the input is closed. Metadata HDF5 itself crashes on is read first by the reader
// process InputFile starts (check_metadata_in_child): an InputError here. HDF5 itself is Debian's build, not instrumented: what the
// sanitizers see there is what reaches the C library (memcpy, malloc).
#include "core/Errors.hpp"
#include "io/input/Input.hpp"
#include "io/hdf5/MetadataSandbox.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// Bytes after each buffer a reader fills, checked untouched: HDF5 is not
// instrumented, and the suppressions name the HDF5 functions whose own
// overruns are HDF5's bugs (hdf5-asan.supp); a write past a buffer cvest
// sized, by whatever function, still ends the run here.
constexpr std::size_t canary_bytes = 256;
constexpr unsigned char canary = 0xC5;

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_input: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // In the run's own folder (run.sh sets TMPDIR to it and removes it after):
  // never a name in a shared /tmp that another user could have planted.
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("cvest-fuzz-input-" + std::to_string(::getpid()) + ".h5")).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  cvest::io::quiet_hdf5_errors();  // as a run: one line of its own, not HDF5's stack
  try {
    cvest::io::InputFile input(path, "multBy", "discount", std::size_t(8) << 20);
    const auto& s = input.shape();
    const cvest::Index ids = std::min<cvest::Index>(s.N, 64), dates = std::min<cvest::Index>(s.T, 2);
    if (double(dates) * double(ids) * double(s.K) <= double(1 << 20)) {  // a small block, whatever the shape claims
      const std::size_t values = std::size_t(dates * ids * s.K);
      std::vector<double> buffer(values + canary_bytes / sizeof(double));
      for (const auto precision : {cvest::Precision::f64, cvest::Precision::f32}) {
        // Not where HDF5 itself would decode filtered chunks: HDF5 1.10.8
        // trusts the size its filters return and copies a whole chunk out
        // of a shorter one (a deflate stream that inflates short crashed
        // it). Upstream's defect, listed in README; cvest's own decoders,
        // which check, are fuzzed.
        const auto hdf5_decodes = [](const cvest::io::CubeStorage& s) {
          return s.read_by == cvest::ReadBy::hdf5 && !s.filters.empty();
        };
        // Each read's canary right after the bytes it was asked for (its
        // own count of values, in the precision asked).
        const auto checked_read = [&](std::size_t count, const auto& read) {
          auto* bytes = reinterpret_cast<unsigned char*>(buffer.data());
          const std::size_t end = count * cvest::element_size(precision);
          std::memset(bytes + end, canary, canary_bytes);
          read();
          if (std::any_of(bytes + end, bytes + end + canary_bytes, [](unsigned char b) { return b != canary; }))
            fail("a read wrote past the block buffer cvest sized");
        };
        if (!hdf5_decodes(input.multby_storage(precision)))
          checked_read(std::size_t(ids * s.K), [&] { input.read_multby({0, ids}, precision, buffer.data()); });
        if (!hdf5_decodes(input.discount_storage(precision)))
          checked_read(values, [&] { input.read_discount(cvest::Block{{0, dates}, {0, ids}}, precision, buffer.data()); });
      }
    }
  } catch (const cvest::InputError&) {
  } catch (const cvest::IoError&) {
  }
  // Every HDF5 object the input opened (files, groups, datasets, named
  // datatypes, attributes) is closed again, on every path. HDF5 1.10's
  // public API counts no dataspaces or property lists (H5Inmembers refuses
  // library types), so those are not checked.
  if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0) fail("an HDF5 object left open after the input was closed");
  return 0;
}
