#pragma once
// HDF5 loads a filter plugin (dlopen) inside the calls that look for or
// apply a filter it has not registered yet, trying every library in its
// plugin path. A library built with -ffast-math sets flush-to-zero and
// denormals-are-zero in the loading thread's MXCSR as it loads (Debian's
// bitshuffle package puts two such plugins, libh5LZF.so and libh5bshuf.so,
// in HDF5's default path): that thread's products of subnormals would then
// be zeros where NumPy's are not (peer.numpy_h5py caught it). Each such call
// is made inside one of these, which puts the thread's mode back.
#include <cfenv>

namespace cvest::io {

class KeepFloatingPointMode {
 public:
  KeepFloatingPointMode() { std::fegetenv(&saved_); }
  ~KeepFloatingPointMode() { std::fesetenv(&saved_); }
  KeepFloatingPointMode(const KeepFloatingPointMode&) = delete;
  KeepFloatingPointMode& operator=(const KeepFloatingPointMode&) = delete;

 private:
  std::fenv_t saved_;
};

}  // namespace cvest::io
