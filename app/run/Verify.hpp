#pragma once
// A run's verification stage, and `cvest verify`: an output recomputed block
// by block from its input and compared bit for bit.
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "io/cube/CubeFile.hpp"
#include "io/cube/CubeReader.hpp"
#include "io/input/Input.hpp"

#include <cstddef>
#include <iosfwd>
#include <string>

namespace cvest::app {

struct VerifyOptions {
  std::string output, input;
  std::string dataset = "cv", multby = "multBy", discount = "discount";
  std::size_t memory_budget = std::size_t(1) << 30;
};

// Where `cvest verify` has no deck: the names a cvest output records. The cv
// dataset is the one carrying cvest's attributes (where `options.dataset` is
// not it, e.g. one written into a group), and the input's multBy and
// discount are the names its attributes give. Unchanged where the output
// records none.
void names_from_output(VerifyOptions& options);

// Recomputes multBy * discount block by block and compares bit for bit.
// Throws VerifyError naming the first differing element.
void verify_output(const VerifyOptions& options, std::ostream& progress);

// The check above reads the input and the output with cvest's own readers,
// as the jobs do; a reader that finds the wrong bytes (it once read datasets
// behind an external link in the wrong file) would fool both the same way.
// So verify_output also reads a sample through HDF5's H5Dread alone, which
// must give the same bits: the first and the last rows of the plan's first,
// last and six blocks between. VerifyError names the first that differs.
// It opens the input again for that, by name; `cv`: the output, opened by
// name by verify_output (the file `cv_reader` reads, or should).
void cross_check_readers(const VerifyOptions& options, const io::InputFile& input, const io::CubeReader& cv_reader,
                         const io::CubeFile& cv, const BlockPlan& plan, Precision precision);

// "" where block `b`'s values (C order, dates x ids x K) are the same bit for
// bit in `expected` and `found`, else "[t, i, k]: found F, expected E" for
// the first that differs. Any NaN matches a NaN.
std::string first_difference(const void* expected, const void* found, const Block& b, Index K, Precision p);

}  // namespace cvest::app
