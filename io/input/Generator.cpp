#include "io/input/Generator.hpp"

#include "io/cube/CubeDataset.hpp"
#include "io/hdf5/Creation.hpp"
#include "core/Errors.hpp"
#include "io/os/Disk.hpp"
#include "io/os/Faults.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/Publish.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>

namespace fs = std::filesystem;

namespace cvest::io {

double generated_bytes(const GenerateSpec& spec) {
  return double(spec.dates * spec.ids * spec.cols + spec.ids * spec.cols) * double(element_size(spec.precision));
}


double generated_value(std::uint64_t seed, int stream, std::uint64_t index) {
  // splitmix64 of (seed, stream, index): reproducible and cheap.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + (std::uint64_t(stream) << 60) + index * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = double(z >> 11) * 0x1.0p-53;  // [0, 1)
  return stream == 0 ? 0.5 + u : 0.05 + 0.95 * u;  // multBy in [0.5, 1.5), discount in [0.05, 1)
}

double generated_value(const GenerateSpec& spec, int stream, std::uint64_t index) {
  if (spec.values == GeneratedValues::uniform) return generated_value(spec.seed, stream, index);
  if (stream == 0) return std::round(generated_value(spec.seed, 0, index) * 100.0) / 100.0;  // two decimals
  const std::uint64_t nk = std::uint64_t(spec.ids * spec.cols), t = index / nk;
  const double rate = 0.005 + 0.075 * (generated_value(spec.seed, 2, index % nk) - 0.05) / 0.95;  // per id and column
  return std::exp(-rate * double(t) / 365.0);
}

void generate_input(const std::string& path, const GenerateSpec& spec, bool overwrite) {
  if (spec.dates <= 0 || spec.ids <= 0 || spec.cols <= 0)
    throw InputError(path + ": generate needs positive dates, ids and cols");
  check_output_path(path, overwrite, true, "pass --overwrite");  // a deck's input is generated only where missing
  const FileIdentity found = FileIdentity::at(path);
  clean_up_after_killed_runs(path);
  check_free_space(path, generated_bytes(spec));
  std::string temp = temp_path_for(path);
  TempFileGuard guard(temp);
  FileIdentity made;
  File file = create_temp_file(path, temp, guard, made);
  try {
    const auto chunk = cube_chunk(spec.ids, spec.cols, element_size(spec.precision));
    const hsize_t T = spec.dates, N = spec.ids, K = spec.cols;
    Dataset m = create_dataset(file, "multBy", spec.precision, {N, K}, {hsize_t(chunk[1]), K}, CompressionSpec{}, path);
    Dataset d = create_dataset(file, "discount", spec.precision, {T, N, K}, {1, hsize_t(chunk[1]), K}, CompressionSpec{}, path);
    using Host = Kokkos::DefaultHostExecutionSpace;
    const Index NK = spec.ids * spec.cols;
    const GenerateSpec values = spec;
    const bool f64 = spec.precision == Precision::f64;
    // One date of values at a time (a 10M x 5 date is 400 MB in double).
    Kokkos::View<double*, Kokkos::HostSpace> vd(Kokkos::view_alloc("cvest::generate::values", Kokkos::WithoutInitializing), NK);
    Kokkos::View<float*, Kokkos::HostSpace> vf(Kokkos::view_alloc("cvest::generate::values_f32", Kokkos::WithoutInitializing), f64 ? 0 : NK);
    const auto fill = [&](int stream, Index base) {
      Kokkos::parallel_for("cvest::generate::fill", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK), [=](Index j) {
        const double v = generated_value(values, stream, std::uint64_t(base + j));
        if (f64) vd(j) = v;
        else vf(j) = float(v);
      });
      Kokkos::fence();
      return f64 ? static_cast<const void*>(vd.data()) : static_cast<const void*>(vf.data());
    };
    write_hyperslab(m, native_type(spec.precision), {0, 0}, {spec.ids, spec.cols}, fill(0, 0), path + ": dataset 'multBy'");
    for (Index t = 0; t < spec.dates; ++t) {
      slow_write_if_injected();
      write_hyperslab(d, native_type(spec.precision), {t, 0, 0}, {1, spec.ids, spec.cols}, fill(1, t * NK),
                      path + ": dataset 'discount'");
    }
    write_string_attribute(d.get(), "generator",
                           "cvest generate seed=" + std::to_string(spec.seed) +
                               (spec.values == GeneratedValues::uniform ? "" : " values=" + std::string(to_string(spec.values))));
    d.reset();
    m.reset();
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) throw IoError(path + ": flush failed (disk full?)");
    file.reset();
    publish(temp, made, path, {found, overwrite}, "input", path);
  } catch (...) {
    file.reset();
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
}


}  // namespace cvest::io
