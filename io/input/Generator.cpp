#include "io/input/Generator.hpp"

#include "io/cube/CubeDataset.hpp"
#include "io/hdf5/Creation.hpp"
#include "core/Errors.hpp"
#include "io/os/Faults.hpp"
#include "io/os/FileIdentity.hpp"
#include "io/os/ReadyToWrite.hpp"

#include <fmt/format.h>

#include <cmath>

#include <Kokkos_Core.hpp>

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
  // A deck's input is generated only where missing: --overwrite is `cvest generate`'s.
  ready_to_write({{path, generated_bytes(spec), overwrite, true, true, "pass --overwrite"}});
  const FileIdentity found = FileIdentity::at(path);  // all that overwrite may replace
  NewFile made(path, {found, overwrite});
  using Host = Kokkos::DefaultHostExecutionSpace;
  const Index NK = spec.ids * spec.cols;
  const GenerateSpec values = spec;
  const bool f64 = spec.precision == Precision::f64;
  // One date of values at a time (a 10M x 5 date is 400 MB in double).
  Kokkos::View<double*, Kokkos::HostSpace> vd(Kokkos::view_alloc("cvest::generate::values", Kokkos::WithoutInitializing), NK);
  Kokkos::View<float*, Kokkos::HostSpace> vf(Kokkos::view_alloc("cvest::generate::values_f32", Kokkos::WithoutInitializing), f64 ? 0 : NK);
  const auto fill = [&](int stream, Index date) {
    if (stream == 1) slow_write_if_injected();
    const Index base = date * NK;
    Kokkos::parallel_for("cvest::generate::fill", Kokkos::RangePolicy<Host, Kokkos::IndexType<Index>>(0, NK), [=](Index j) {
      const double v = generated_value(values, stream, std::uint64_t(base + j));
      if (f64) vd(j) = v;
      else vf(j) = float(v);
    });
    Kokkos::fence();
    return f64 ? static_cast<const void*>(vd.data()) : static_cast<const void*>(vf.data());
  };
  write_input_cube(made.file(), path, spec.precision, spec.dates, spec.ids, spec.cols, fill,
                   "cvest generate seed=" + std::to_string(spec.seed) +
                       (spec.values == GeneratedValues::uniform ? "" : " values=" + std::string(to_string(spec.values))));
  made.publish("input");
}


}  // namespace cvest::io
