#pragma once
// The failures main() turns into exit codes. Messages are one line and name
// the file, the dataset, and what was expected versus found.
#include <stdexcept>
#include <string>

namespace cvest {

// Bad input or deck: exit 2. (std::invalid_argument is treated the same.)
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A read, write, create or rename failed: exit 3.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Output differs from multBy * discount: exit 4.
struct VerifyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace cvest
