// libFuzzer harness for opening an input file: HDF5's reading of the file's
// metadata (superblock, object headers, B-trees, filter pipelines) and
// cvest's checks of multBy and discount, then the first rows through the
// reader a run would use (pread, cvest's chunk decoders, or H5Dread), in both
// precisions. A damaged file must end in InputError or IoError, as `cvest
// run` reports it; anything else escaping, a crash, a sanitizer report or a
// hang fails. HDF5 itself is Debian's build, not instrumented: what the
// sanitizers see there is what reaches the C library (memcpy, malloc).
#include "core/Errors.hpp"
#include "io/Input.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/cvest-fuzz-input-" + std::to_string(::getpid()) + ".h5";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  try {
    cvest::io::InputFile input(path, "multBy", "discount", std::size_t(8) << 20);
    const auto& s = input.shape();
    const cvest::Index ids = std::min<cvest::Index>(s.N, 64), dates = std::min<cvest::Index>(s.T, 2);
    if (double(dates) * double(ids) * double(s.K) <= double(1 << 20)) {  // a small block, whatever the shape claims
      std::vector<double> buffer(std::size_t(dates * ids * s.K));
      for (const auto precision : {cvest::Precision::f64, cvest::Precision::f32}) {
        input.read_multby({0, ids}, precision, buffer.data());
        input.read_discount(cvest::Block{{0, dates}, {0, ids}}, precision, buffer.data());
        (void)input.discount_storage(precision);
      }
    }
  } catch (const cvest::InputError&) {
  } catch (const cvest::IoError&) {
  }
  return 0;
}
