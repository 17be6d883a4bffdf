// `import cvest`: the kernels, decks, verification and benchmark from Python
// (pybind11), built from the same sources as the command. A front end like
// app/main.cpp: the commands are app/Commands.hpp's; multiply checks its
// arrays, makes views over them and calls core/.
#include "app/bench/Formats.hpp"
#include "app/bench/Server.hpp"
#include "app/Deck.hpp"
#include "app/Commands.hpp"
#include "app/FirstUse.hpp"
#include "app/tune/TuneWalks.hpp"
#include "app/run/ReportFormats.hpp"
#include "core/Errors.hpp"
#include "core/Multiply.hpp"
#include "core/Spaces.hpp"
#include "core/Version.hpp"
#include "core/pipeline/Pipeline.hpp"
#include "python/CallerMultiply.hpp"
#include "python/KokkosThread.hpp"

#include <Kokkos_Core.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <type_traits>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace py = pybind11;
using namespace cvest;
using cvest::python::on_kokkos_thread;

namespace {

// Kokkos once per process: at the first call that needs it (or initialize()),
// finalized at interpreter exit (cvest/__init__.py registers finalize()).
bool kokkos_started = false;

void initialize(std::optional<int> threads, const std::vector<std::string>& kokkos_args) {
  cvest::check_host_vectors_setting();  // before any kernel, as the command line
  if (Kokkos::is_initialized()) {
    if (threads || !kokkos_args.empty())
      throw std::invalid_argument("cvest is already initialized (settings go to the first initialize() call, "
                                  "before any other cvest call)");
    return;
  }
  if (kokkos_started) throw std::invalid_argument("cvest was finalized; Kokkos cannot start twice in one process");
  std::vector<std::string> args{"cvest"};
  for (const auto& a : kokkos_args) {
    if (a.rfind("--kokkos-", 0) != 0) throw std::invalid_argument("not a Kokkos setting: '" + a + "' (--kokkos-...)");
    args.push_back(a);
  }
  if (threads) {
    if (*threads < 1) throw std::invalid_argument("threads must be at least 1, got " + std::to_string(*threads));
#ifdef _OPENMP
    omp_set_num_threads(*threads);  // Kokkos' OpenMP space takes omp_get_max_threads() (3.4 and 4.x alike)
#endif
  } else if (!std::getenv("OMP_NUM_THREADS")) {
#ifdef _OPENMP
    // Every processor the process may use: another library in the process
    // may have lowered omp_get_max_threads() (numba's OpenMP layer set it to
    // 1 where OMP_PROC_BIND had bound the main thread to one core).
    omp_set_num_threads(omp_get_num_procs());
#endif
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = int(argv.size());
  Kokkos::initialize(argc, argv.data());
  kokkos_started = true;
  app::apply_walk_records(true);  // flat's streams and dates at once as the command line takes them
}

void ensure_initialized() {
  if (!Kokkos::is_initialized()) initialize(std::nullopt, {});
}

struct BenchServer;
void release_bench_servers();

// Kokkos stops (and the bench servers' views go) on the Kokkos thread,
// which then ends: at interpreter exit, or when called.
void finalize() {
  if (python::KokkosThread::forked()) return;  // the parent's Kokkos, not this process's to stop
  on_kokkos_thread([] {
    release_bench_servers();
    if (Kokkos::is_initialized()) Kokkos::finalize();
  });
  python::KokkosThread::get().stop();
}

// --- multiply ------------------------------------------------------------

py::module_ numpy() { return py::module_::import("numpy"); }

std::string dtype_name(const py::dtype& dt) { return py::cast<std::string>(dt.attr("name")); }

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t r = 0; r < a.ndim(); ++r) s += (r ? ", " : "") + std::to_string(a.shape(r));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// The array behind `object`, checked: floats of 4 or 8 bytes, `rank` dims.
py::array float_array(const py::object& object, const char* name, int rank) {
  py::array a = numpy().attr("asarray")(object);
  const py::dtype dt = a.dtype();
  if (dt.kind() != 'f' || (dt.itemsize() != 4 && dt.itemsize() != 8))
    throw py::value_error(std::string(name) + " must hold float32 or float64, found " +
                          dtype_name(dt));
  if (a.ndim() != rank)
    throw py::value_error(std::string(name) + " must be " + std::to_string(rank) + "-D " +
                          (rank == 3 ? "(T, N, K)" : "(N, K)") + ", found " + std::to_string(a.ndim()) + "-D " +
                          shape_text(a));
  return a;
}

bool in_order(const py::array& a, LayoutKind layout) {
  return layout == LayoutKind::right ? (a.flags() & py::array::c_style) != 0 : (a.flags() & py::array::f_style) != 0;
}

template <class Scalar, class Layout>
void multiply_views(Strategy strategy, const py::array& m, const py::array& d, py::array& cv) {
  using Space = Kokkos::DefaultHostExecutionSpace;
  const Index T = d.shape(0), N = d.shape(1), K = d.shape(2);
  // Unmanaged views over NumPy's memory: no copy.
  Operands<Scalar, Layout, Space::memory_space> ops{
      Table<const Scalar, Layout, Space::memory_space>(static_cast<const Scalar*>(m.data()), N, K),
      Cube<const Scalar, Layout, Space::memory_space>(static_cast<const Scalar*>(d.data()), T, N, K),
      Cube<Scalar, Layout, Space::memory_space>(static_cast<Scalar*>(cv.mutable_data()), T, N, K)};
  check_operands(ops);
  multiply(strategy, Space(), ops, CvNext::memory);
  Space().fence();
}

// Host arrays through the block pipeline (the overlapped one): C-order
// blocks copied into host staging slots by its I/O thread, to the compute
// space and back (pinned staging and streams on a Cuda build: what NumPy
// arrays take there), computed in `Layout`.
template <class Scalar, class Layout>
void multiply_staged(Strategy strategy, const py::array& m, const py::array& d, py::array& cv) {
  const Index T = d.shape(0), N = d.shape(1), K = d.shape(2);
  const auto* mp = static_cast<const Scalar*>(m.data());
  const auto* dp = static_cast<const Scalar*>(d.data());
  auto* cp = static_cast<Scalar*>(cv.mutable_data());
  const std::size_t row = std::size_t(K) * sizeof(Scalar);
  const BlockPlan plan = plan_blocks(T, N, K, sizeof(Scalar), std::size_t(1) << 30, {}, 0, layout_kind<Layout>());
  BlockIO<Scalar> io;
  io.read_multby = [&](Range ids, Scalar* out) { std::memcpy(out, mp + ids.begin * K, std::size_t(ids.size()) * row); };
  io.read_discount = [&](const Block& b, Scalar* out) {
    for (Index t = b.dates.begin; t < b.dates.end; ++t)
      std::memcpy(out + (t - b.dates.begin) * b.ids.size() * K, dp + (t * N + b.ids.begin) * K,
                  std::size_t(b.ids.size()) * row);
  };
  io.write_cv = [&](const Block& b, const Scalar* in) {
    for (Index t = b.dates.begin; t < b.dates.end; ++t)
      std::memcpy(cp + (t * N + b.ids.begin) * K, in + (t - b.dates.begin) * b.ids.size() * K,
                  std::size_t(b.ids.size()) * row);
  };
  PipelineOptions options;
  options.strategy = strategy;
  options.progress = false;
  options.force_staging = true;  // host builds: the same copies a device build makes
  std::ostream null_out(nullptr);
  run_pipeline<Scalar, Layout>(plan, io, options, null_out);
}

#ifdef KOKKOS_ENABLE_CUDA
// An array on the GPU as __cuda_array_interface__ describes it (CuPy,
// numba.cuda, PyTorch): used in place.
struct DeviceArray {
  void* data = nullptr;
  std::vector<Index> shape;
  std::string typestr;  // "<f8", "<f4"
  bool readonly = false, c_order = true, f_order = false;
};

std::optional<DeviceArray> device_array(const py::object& o) {
  if (o.is_none() || !py::hasattr(o, "__cuda_array_interface__")) return std::nullopt;
  const py::dict cai = o.attr("__cuda_array_interface__");
  DeviceArray a;
  a.shape = cai["shape"].cast<std::vector<Index>>();
  a.typestr = cai["typestr"].cast<std::string>();
  const py::tuple data = cai["data"];
  a.data = reinterpret_cast<void*>(data[0].cast<std::uintptr_t>());
  a.readonly = data[1].cast<bool>();
  const std::size_t item = a.typestr.size() == 3 ? std::size_t(a.typestr[2] - '0') : 0;
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const auto strides = cai["strides"].cast<std::vector<Index>>();
    Index c = Index(item), f = Index(item);
    a.c_order = a.f_order = true;
    for (std::size_t r = a.shape.size(); r-- > 0;) {
      if (a.shape[r] > 1 && strides[r] != c) a.c_order = false;
      c *= a.shape[r];
    }
    for (std::size_t r = 0; r < a.shape.size(); ++r) {
      if (a.shape[r] > 1 && strides[r] != f) a.f_order = false;
      f *= a.shape[r];
    }
  }
  return a;
}

template <class Scalar, class Layout>
void multiply_on_device(Strategy strategy, const DeviceArray& m, const DeviceArray& d, const DeviceArray& cv) {
  using Mem = Kokkos::Cuda::memory_space;
  const Index T = d.shape[0], N = d.shape[1], K = d.shape[2];
  Operands<Scalar, Layout, Mem> ops{Table<const Scalar, Layout, Mem>(static_cast<const Scalar*>(m.data), N, K),
                                    Cube<const Scalar, Layout, Mem>(static_cast<const Scalar*>(d.data), T, N, K),
                                    Cube<Scalar, Layout, Mem>(static_cast<Scalar*>(cv.data), T, N, K)};
  Kokkos::fence();  // the arrays' producers, on whatever stream, are done
  multiply(strategy, Kokkos::Cuda(), ops, CvNext::memory);
  Kokkos::fence();
}

// multiply() where discount is a device array: all three must be, of one
// type and one order; `out` is made with CuPy where not given.
py::object multiply_device_arrays(const DeviceArray& d, const py::object& multby, const py::object& out,
                                  Strategy strategy, const std::optional<std::string>& layout_name) {
  const auto m = device_array(multby);
  if (!m) throw py::value_error("discount is a device array (__cuda_array_interface__): multBy must be one too");
  const auto text = [](const std::vector<Index>& s) {
    std::string t = "(";
    for (std::size_t r = 0; r < s.size(); ++r) t += (r ? ", " : "") + std::to_string(s[r]);
    return t + ")";
  };
  if (d.shape.size() != 3) throw py::value_error("discount must be 3-D (T, N, K), found " + text(d.shape));
  if (m->shape.size() != 2 || m->shape[0] != d.shape[1] || m->shape[1] != d.shape[2])
    throw py::value_error("multBy is " + text(m->shape) + ", expected (" + std::to_string(d.shape[1]) + ", " +
                          std::to_string(d.shape[2]) + ") to match discount " + text(d.shape));
  if ((d.typestr != "<f8" && d.typestr != "<f4") || m->typestr != d.typestr)
    throw py::value_error("device arrays must both hold float64 or both float32 (cast first), found multBy " +
                          m->typestr + ", discount " + d.typestr);
  LayoutKind layout = d.c_order ? LayoutKind::right : LayoutKind::left;
  if (layout_name) layout = layout_from_name(*layout_name);
  const bool right = layout == LayoutKind::right;
  if (!(right ? d.c_order && m->c_order : d.f_order && m->f_order))
    throw py::value_error(std::string("device arrays must be ") + (right ? "C" : "Fortran") +
                          "-contiguous for Layout" + (right ? "Right" : "Left") + " (they are used in place)");
  py::object result = out;
  if (result.is_none()) {
    py::module_ cupy;
    try {
      cupy = py::module_::import("cupy");
    } catch (const py::error_already_set&) {
      throw py::value_error("out= is needed for device arrays where CuPy is not installed");
    }
    result = cupy.attr("empty")(py::make_tuple(d.shape[0], d.shape[1], d.shape[2]), d.typestr == "<f8" ? "float64" : "float32",
                                right ? "C" : "F");
  }
  const auto cv = device_array(result);
  if (!cv) throw py::value_error("out must be a device array (__cuda_array_interface__) like discount");
  if (cv->readonly) throw py::value_error("out is read-only");
  if (cv->shape != d.shape) throw py::value_error("out is " + text(cv->shape) + ", expected discount's shape " + text(d.shape));
  if (cv->typestr != d.typestr) throw py::value_error("out holds " + cv->typestr + ", expected " + d.typestr);
  if (!(right ? cv->c_order : cv->f_order))
    throw py::value_error(std::string("out must be ") + (right ? "C" : "Fortran") + "-contiguous for Layout" +
                          (right ? "Right" : "Left") + " (cvest writes it in place)");
  on_kokkos_thread([&] {
    ensure_initialized();
    with_types(d.typestr == "<f8" ? Precision::f64 : Precision::f32, layout, [&](auto scalar, auto layout_tag) {
      multiply_on_device<decltype(scalar), decltype(layout_tag)>(strategy, *m, d, *cv);
      return 0;
    });
  });
  return result;
}
#endif

// --- multiply on the calling thread ----------------------------------------

// Arrays of at least this many bytes are computed with the GIL released.
constexpr std::size_t release_gil_bytes = std::size_t(64) << 10;

// discount's bytes below which cvest.multiply computes on the calling thread
// rather than hand the call to the Kokkos thread: measured once, at the
// first call that large. Both paths are timed on the same warmed arrays at
// two sizes (4 and 32 MiB of discount, interleaved, median of 5); each is a
// line (a fixed cost: the hand-off, about 12 us; and seconds per byte), and
// the crossover is where the hand-off's line falls a fifth below the calling
// thread's, kept within [the floor, 128 MiB]
// (past that, streaming stores on every core win: python/CallerMultiply.hpp).
// Below the floor the hand-off alone takes longer than the product.
constexpr std::size_t caller_floor_bytes = std::size_t(32) << 10, caller_ceiling_bytes = std::size_t(128) << 20;
std::atomic<std::size_t> caller_limit{0};  // 0: not measured yet

std::size_t measure_caller_limit() {
  static std::mutex m;
  // Waited for without the GIL: the thread measuring needs it back.
  std::unique_lock lock(m, std::defer_lock);
  {
    py::gil_scoped_release release;
    lock.lock();
  }
  if (const std::size_t known = caller_limit.load()) return known;
  const int threads = on_kokkos_thread([] {
    ensure_initialized();
    return Kokkos::DefaultHostExecutionSpace().concurrency();
  });
  std::size_t limit = std::numeric_limits<std::size_t>::max();  // one thread: the hand-off never pays
  if (threads > 1) {
    constexpr Index K = 5, T = 4;
    const std::size_t sizes[2] = {std::size_t(4) << 20, std::size_t(32) << 20};
    double here_s[2] = {}, handed_s[2] = {};
    const Index N = Index(sizes[1] / sizeof(double) / std::size_t(T * K));
    std::vector<double> mv(std::size_t(N * K), 1.25), dv(std::size_t(T * N * K), 0.5), cv(dv.size());
    for (int s = 0; s < 2; ++s) {
      const Index n = Index(sizes[s] / sizeof(double) / std::size_t(T * K));
      const auto here = [&] { python::multiply_c(mv.data(), dv.data(), cv.data(), T, n * K); };
      const auto handed = [&] {
        on_kokkos_thread([&] {
          using Space = Kokkos::DefaultHostExecutionSpace;
          using Mem = Space::memory_space;
          Operands<double, Kokkos::LayoutRight, Mem> ops{
              Table<const double, Kokkos::LayoutRight, Mem>(mv.data(), n, K),
              Cube<const double, Kokkos::LayoutRight, Mem>(dv.data(), T, n, K),
              Cube<double, Kokkos::LayoutRight, Mem>(cv.data(), T, n, K)};
          multiply(Strategy::flat, Space(), ops, CvNext::memory);
          Space().fence();
        });
      };
      std::vector<double> a, b;
      for (int r = 0; r < 6; ++r) {  // the first of each: warm-up
        Kokkos::Timer timer;
        {
          py::gil_scoped_release release;
          here();
        }
        a.push_back(timer.seconds());
        timer.reset();
        handed();
        b.push_back(timer.seconds());
      }
      std::sort(a.begin() + 1, a.end());
      std::sort(b.begin() + 1, b.end());
      here_s[s] = a[3], handed_s[s] = b[3];
    }
    const double span = double(sizes[1] - sizes[0]);
    const double here_per = (here_s[1] - here_s[0]) / span, handed_per = (handed_s[1] - handed_s[0]) / span;
    const double here_fixed = here_s[0] - here_per * double(sizes[0]), handed_fixed = handed_s[0] - handed_per * double(sizes[0]);
    // Where the hand-off is clearly faster (a fifth), so noise in the two
    // lines does not hand over calls it would make slower.
    constexpr double margin = 0.8;
    double crossing = double(caller_ceiling_bytes);
    if (handed_per < margin * here_per)
      crossing = (handed_fixed - margin * here_fixed) / (margin * here_per - handed_per);
    limit = std::size_t(std::clamp(crossing, double(caller_floor_bytes), double(caller_ceiling_bytes)));
  }
  caller_limit.store(limit);
  return limit;
}

// Whether a multiply of `bytes` of discount runs on the calling thread.
bool on_caller_thread(std::size_t bytes) {
  constexpr bool on_device = !std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>;
  if (python::KokkosThread::forked()) return true;
  if (on_device) return false;  // host arrays take the pipeline to the device there
  if (bytes < caller_floor_bytes) return true;
  const std::size_t limit = caller_limit.load();
  return bytes < (limit ? limit : measure_caller_limit());
}

// m, d and cv contiguous in one order (`c`), of one native type.
void multiply_here(const py::array& m, const py::array& d, py::array& cv, bool c) {
  const Index T = d.shape(0), n = d.shape(1) * d.shape(2);
  const bool f64 = d.itemsize() == 8;
  const auto compute = [&] {
    if (f64) {
      const auto* mp = static_cast<const double*>(m.data());
      const auto* dp = static_cast<const double*>(d.data());
      auto* cp = static_cast<double*>(cv.mutable_data());
      c ? python::multiply_c(mp, dp, cp, T, n) : python::multiply_f(mp, dp, cp, T, n);
    } else {
      const auto* mp = static_cast<const float*>(m.data());
      const auto* dp = static_cast<const float*>(d.data());
      auto* cp = static_cast<float*>(cv.mutable_data());
      c ? python::multiply_c(mp, dp, cp, T, n) : python::multiply_f(mp, dp, cp, T, n);
    }
  };
  if (std::size_t(d.nbytes()) < release_gil_bytes) return compute();
  py::gil_scoped_release release;
  compute();
}

bool same_type(const py::array& a, const py::dtype& t) { return a.dtype().is(t); }

// The common call, checked in a few steps: multBy and discount NumPy arrays
// of one native float type, contiguous in one order, `out` absent or
// matching. nullopt (the general path, which also words the errors) otherwise.
std::optional<py::array> multiply_plain(const py::object& multby, const py::object& discount, const py::object& out) {
  if (!py::isinstance<py::array>(discount) || !py::isinstance<py::array>(multby)) return std::nullopt;
  const auto d = py::reinterpret_borrow<py::array>(discount), m = py::reinterpret_borrow<py::array>(multby);
  static const py::dtype f64 = py::dtype::of<double>(), f32 = py::dtype::of<float>();
  const py::dtype& type = same_type(d, f64) ? f64 : f32;
  if (!same_type(d, type) || !same_type(m, type) || d.ndim() != 3 || m.ndim() != 2 || m.shape(0) != d.shape(1) ||
      m.shape(1) != d.shape(2))
    return std::nullopt;
  const bool c = (d.flags() & py::array::c_style) != 0;
  const int order = c ? py::array::c_style : py::array::f_style;
  if (!(d.flags() & order) || !(m.flags() & order)) return std::nullopt;
  if (!on_caller_thread(std::size_t(d.nbytes()))) return std::nullopt;
  py::array cv;
  if (out.is_none()) {
    // NumPy's own allocation, as np.multiply's: no shape vectors on the heap.
    auto& api = py::detail::npy_api::get();
    Py_intptr_t dims[3] = {d.shape(0), d.shape(1), d.shape(2)};
    constexpr int fortran = 0x0002;  // NPY_ARRAY_F_CONTIGUOUS: strides laid out in Fortran order
    cv = py::reinterpret_steal<py::array>(api.PyArray_NewFromDescr_(
        api.PyArray_Type_, type.inc_ref().ptr(), 3, dims, nullptr, nullptr, c ? 0 : fortran, nullptr));
    if (!cv) throw py::error_already_set();
  } else {
    if (!py::isinstance<py::array>(out)) return std::nullopt;
    cv = py::reinterpret_borrow<py::array>(out);
    if (!cv.writeable() || !same_type(cv, type) || cv.ndim() != 3 || cv.shape(0) != d.shape(0) ||
        cv.shape(1) != d.shape(1) || cv.shape(2) != d.shape(2) || !(cv.flags() & order))
      return std::nullopt;
  }
  multiply_here(m, d, cv, c);
  return cv;
}

py::object multiply_arrays(const py::object& multby, const py::object& discount, const py::object& out,
                           const std::string& strategy_name, const std::optional<std::string>& layout_name,
                           bool staged) {
  // Every strategy and layout gives the same bits: the calling thread takes
  // the call where the deck-like choices are left to cvest.
  if (!staged && !layout_name && strategy_name == "flat")
    if (auto cv = multiply_plain(multby, discount, out)) return std::move(*cv);
  constexpr bool on_device = !std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>;
#ifdef KOKKOS_ENABLE_CUDA
  if (const auto d = device_array(discount))
    return multiply_device_arrays(*d, multby, out, strategy_from_name(strategy_name), layout_name);
#endif
  // Host arrays on a device build take the pipeline; there they are C order
  // (the compute layout is `layout`, transposed on the device).
  staged = staged || on_device;
  py::array m = float_array(multby, "multBy", 2), d = float_array(discount, "discount", 3);
  if (m.shape(0) != d.shape(1) || m.shape(1) != d.shape(2))
    throw py::value_error("multBy is " + shape_text(m) + ", expected (" + std::to_string(d.shape(1)) + ", " +
                          std::to_string(d.shape(2)) + ") to match discount " + shape_text(d));
  const Strategy strategy = strategy_from_name(strategy_name);
  // NumPy's promotion: float64 if either input is.
  const bool f64 = m.dtype().itemsize() == 8 || d.dtype().itemsize() == 8;
  const py::dtype type = py::dtype(f64 ? "float64" : "float32");
  // The layout: given, else discount's order (C: LayoutRight, Fortran:
  // LayoutLeft; neither, e.g. a strided view: LayoutRight).
  LayoutKind layout = LayoutKind::right;
  if (layout_name) {
    layout = layout_from_name(*layout_name);
  } else if (!staged && !in_order(d, LayoutKind::right) && in_order(d, LayoutKind::left)) {
    layout = LayoutKind::left;
  }
  const char* order = layout == LayoutKind::right || staged ? "C" : "F";
  const LayoutKind host_layout = staged ? LayoutKind::right : layout;
  // Inputs in that order and type are used in place; others (a strided
  // view, the other order, the narrower type) are copied first, as NumPy
  // casts them.
  m = numpy().attr("asarray")(m, type, order);
  d = numpy().attr("asarray")(d, type, order);
  py::array cv;
  if (out.is_none()) {
    cv = numpy().attr("empty")(py::make_tuple(d.shape(0), d.shape(1), d.shape(2)), type, order);
  } else {
    if (!py::isinstance<py::array>(out)) throw py::value_error("out must be a NumPy array");
    cv = py::reinterpret_borrow<py::array>(out);
    if (!cv.writeable()) throw py::value_error("out is read-only");
    if (cv.ndim() != 3 || cv.shape(0) != d.shape(0) || cv.shape(1) != d.shape(1) || cv.shape(2) != d.shape(2))
      throw py::value_error("out is " + shape_text(cv) + ", expected discount's shape " + shape_text(d));
    if (!cv.dtype().is(type))
      throw py::value_error("out holds " + dtype_name(cv.dtype()) + ", expected " +
                            dtype_name(type) + " (NumPy's promotion of multBy and discount)");
    if (!in_order(cv, host_layout))
      throw py::value_error(std::string("out must be ") + (host_layout == LayoutKind::right ? "C" : "Fortran") +
                            "-contiguous for " + (staged ? "the block pipeline" : host_layout == LayoutKind::right
                                                                                      ? "LayoutRight"
                                                                                      : "LayoutLeft") +
                            " (cvest writes it in place)");
  }
  // In a forked child (no Kokkos there), on the calling thread, in the
  // order the arrays now have.
  if (python::KokkosThread::forked()) {
    multiply_here(m, d, cv, std::string(order) == "C");
    return std::move(cv);
  }
  // The arrays are only read and written through their data here, on the
  // Kokkos thread; the caller keeps them alive (and holds no GIL) meanwhile.
  on_kokkos_thread([&] {
    ensure_initialized();
    // flat's choices measured once where unrecorded, said on stderr (a
    // notebook's first call takes about a second more: app/FirstUse.hpp).
    if (strategy == Strategy::flat) app::measure_on_first_use(f64 ? Precision::f64 : Precision::f32, std::cerr);
    with_types(f64 ? Precision::f64 : Precision::f32, layout, [&](auto scalar, auto layout_tag) {
      if (staged) multiply_staged<decltype(scalar), decltype(layout_tag)>(strategy, m, d, cv);
      else if constexpr (!on_device) multiply_views<decltype(scalar), decltype(layout_tag)>(strategy, m, d, cv);
      return 0;
    });
  });
  return std::move(cv);
}

// --- decks, verify, bench ------------------------------------------------

py::object json_to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

// {"run.strategy": "flat", "run.repeats": 3} -> "run.strategy=\"flat\"", ...
// (TOML values, as --set takes them).
std::vector<std::string> overrides_of(const py::dict& set) {
  std::vector<std::string> out;
  const py::object dumps = py::module_::import("json").attr("dumps");
  for (const auto& [key, value] : set) out.push_back(std::string(py::str(key)) + "=" + std::string(py::str(dumps(value))));
  return out;
}

py::object run_deck_file(const std::string& deck_path, const py::dict& set, bool plan, bool no_resume) {
  app::RunArgs args{deck_path, overrides_of(set), plan, no_resume};
  const app::RunReport report = on_kokkos_thread([&] {
    ensure_initialized();
    return app::run_command(args, app::Ranks(), std::cerr, nullptr);
  });
  return json_to_python(app::to_json(report));
}

bool run_verify(const std::string& output, const std::optional<std::string>& input, const std::optional<std::string>& deck_path,
            const std::optional<std::string>& memory_budget) {
  const app::VerifyArgs args{output, input, deck_path, memory_budget};
  on_kokkos_thread([&] {
    ensure_initialized();
    app::verify_command(args, std::cerr);
  });
  return true;
}

// A benchmark's arguments from Python's (names checked when it runs).
app::BenchArgs bench_args(Index dates, Index ids, Index cols, const std::optional<std::vector<std::string>>& strategies,
                          const std::vector<std::string>& layouts, const std::vector<std::string>& precisions) {
  app::BenchArgs args;
  args.sizes.dates = dates, args.sizes.ids = ids, args.sizes.cols = cols;
  if (strategies) args.strategies = *strategies;
  args.layouts = layouts;
  args.precisions = precisions;
  return args;
}

py::object run_bench(Index dates, Index ids, Index cols, const std::optional<std::vector<std::string>>& strategies,
                 const std::vector<std::string>& layouts, const std::vector<std::string>& precisions, int repeats,
                 double warm_seconds) {
  app::BenchArgs args = bench_args(dates, ids, cols, strategies, layouts, precisions);
  args.sizes.repeats = repeats;
  args.sizes.warm_seconds = warm_seconds;
  const app::bench::Report report = on_kokkos_thread([&] {
    ensure_initialized();
    return app::bench_command(args, std::cerr, nullptr);
  });
  return json_to_python(app::bench::to_json(report));
}

// cvest bench's arrays kept between calls, for a script that interleaves
// cvest's own timing with other contenders in the same process. Their
// Kokkos views must go before Kokkos does: finalize() releases every live
// one (Python may collect the object only after the atexit hook ran).
struct BenchServer {
  std::unique_ptr<app::bench::Server> server;
  explicit BenchServer(std::unique_ptr<app::bench::Server> s);
  ~BenchServer();
};
std::mutex live_bench_servers_m;  // Python threads make and drop them; finalize() walks them
std::set<BenchServer*> live_bench_servers;
BenchServer::BenchServer(std::unique_ptr<app::bench::Server> s) : server(std::move(s)) {
  const std::lock_guard lock(live_bench_servers_m);
  live_bench_servers.insert(this);
}
BenchServer::~BenchServer() {
  {
    const std::lock_guard lock(live_bench_servers_m);
    live_bench_servers.erase(this);
  }
  // In a forked child its views are the parent's Kokkos memory: left as they are.
  if (python::KokkosThread::forked()) {
    (void)server.release();
    return;
  }
  on_kokkos_thread([&] { server.reset(); });  // its views go where Kokkos runs (finalize may have released them)
}

std::unique_ptr<BenchServer> make_bench_server(Index dates, Index ids, Index cols,
                                                 const std::optional<std::vector<std::string>>& strategies,
                                                 const std::vector<std::string>& layouts, const std::string& precision) {
  const app::bench::Config config = app::bench_config(bench_args(dates, ids, cols, strategies, layouts, {precision}));
  std::unique_ptr<app::bench::Server> server = on_kokkos_thread([&] {
    ensure_initialized();
    return std::make_unique<app::bench::Server>(config);
  });
  return std::make_unique<BenchServer>(std::move(server));
}

void release_bench_servers() {
  const std::lock_guard lock(live_bench_servers_m);
  for (BenchServer* s : live_bench_servers) s->server.reset();
}

py::object server_command(BenchServer& s, const std::string& command) {
  // Checked where it is used: a finalize() handed to the Kokkos thread
  // before this call releases the arrays there.
  const nlohmann::json reply = on_kokkos_thread([&] {
    if (!s.server) throw InputError("this BenchServer's arrays were released when cvest finalized");
    return s.server->handle(command);
  });
  if (reply.contains("error")) throw py::value_error(reply["error"].get<std::string>());
  return json_to_python(reply);
}

// --- cvest.multiply's entry ------------------------------------------------

// The call small arrays make over and over, at the price of a NumPy ufunc
// call: a CPython vectorcall function (pybind11's argument conversion alone
// took longer than NumPy's whole np.multiply of 500 elements) that takes
// (multby, discount[, out]) and hands anything else, and every error, to the
// general path (_multiply, which words the messages).
constexpr const char multiply_doc[] =
    "multiply(multby, discount, out=None, strategy='flat', layout=None, staged=False)\n--\n\n"
    R"(cv[t, i, k] = multby[i, k] * discount[t, i, k]; returns cv (`out` when given).

The same result as NumPy's `multby[None] * discount`, bit for bit.
multby: (N, K) and discount: (T, N, K) arrays of float32 or float64.
  The result is float64 if either is (NumPy's promotion), else float32.
out: where to write cv: a writable array of discount's shape, of that
  type, contiguous in the layout's order; None allocates one.
strategy: how the work is sliced: flat, per_date, per_id, one_worker,
  team, kokkos_kernels (see README's Strategies).
layout: "right" (C order) or "left" (Fortran order); None: discount's
  order (C-contiguous or strided: right; Fortran-contiguous: left).
Arrays already in the layout's order and the result's type are used in
place (no copy); others (strided views, the other order, the narrower
type of a mixed pair) are copied first. The GIL is released while the
kernel runs. Any thread may call it; calls from several threads at once run
one after another (all Kokkos work runs on one thread of cvest's). Small
arrays (below a size measured once per process, where handing the call to
that thread would cost more than the product) are computed on the calling
thread, as in a child forked after cvest started (multiprocessing's 'fork'). Raises ValueError for shapes, types, a read-only or
mismatched out, and an unknown strategy or layout.
staged: run through the block pipeline (host staging slots, copies in and
  out, as a file-to-file run): what NumPy arrays take on a Cuda build (C
  order there; pinned staging, overlapped streams). On host builds it only
  checks that path.
Cuda builds: arrays with __cuda_array_interface__ (CuPy, numba.cuda) are
used in place on the GPU: multby, discount and out all on the device, one
type and one order (out made with CuPy when not given).)";

PyObject* general_multiply = nullptr;  // the module's _multiply, kept for the module's life

PyObject* fast_multiply(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t positional = PyVectorcall_NARGS(nargs), keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject* out = positional >= 3 ? args[2] : nullptr;
  bool plain = positional >= 2 && positional <= 3 && keywords <= (out ? 0 : 1);
  if (plain && keywords == 1) {
    plain = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") == 0;
    out = args[positional];
  }
  if (plain) {
    try {
      const py::handle none = Py_None;
      auto cv = multiply_plain(py::reinterpret_borrow<py::object>(args[0]), py::reinterpret_borrow<py::object>(args[1]),
                               py::reinterpret_borrow<py::object>(out ? py::handle(out) : none));
      if (cv) return cv->release().ptr();
    } catch (py::error_already_set& e) {
      e.restore();
      return nullptr;
    } catch (...) {  // the general path meets it again, and pybind11 gives it its Python type
    }
  }
#if PY_VERSION_HEX < 0x03090000
  return _PyObject_Vectorcall(general_multiply, args, nargs, kwnames);
#else
  return PyObject_Vectorcall(general_multiply, args, nargs, kwnames);
#endif
}

void add_fast_multiply(py::module_& module) {
  general_multiply = py::object(module.attr("_multiply")).release().ptr();  // a reference kept for the process's life
  static PyMethodDef def{"multiply", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_multiply)),
                         METH_FASTCALL | METH_KEYWORDS, multiply_doc};
  // Its __module__ a name, as a function's is (pickle finds it by it).
  module.add_object("multiply", py::reinterpret_steal<py::object>(
                                    PyCFunction_NewEx(&def, nullptr, module.attr("__name__").ptr())));
}

}  // namespace

PYBIND11_MODULE(_cvest, module) {
  module.doc() = "cvest: cv[t, i, k] = multBy[i, k] * discount[t, i, k] on Kokkos (see help(cvest.multiply))";
  module.attr("__version__") = std::string(CVEST_VERSION);
  module.attr("execution_space") = std::string(Kokkos::DefaultExecutionSpace::name());
  // The command's exit codes as exception types: 2 bad input (a ValueError),
  // 3 I/O (an OSError), 4 a mismatch.
  py::register_exception<InputError>(module, "InputError", PyExc_ValueError);
  py::register_exception<IoError>(module, "IoError", PyExc_OSError);
  py::register_exception<VerifyError>(module, "VerifyError", PyExc_RuntimeError);

  module.def("initialize", [](std::optional<int> threads, const std::vector<std::string>& kokkos_args) {
    on_kokkos_thread([&] { initialize(threads, kokkos_args); });
  }, py::arg("threads") = std::nullopt,
             py::arg("kokkos_args") = std::vector<std::string>{},
             R"(Starts Kokkos for this process. Optional: the first cvest call does it
with defaults. threads: host threads (OpenMP builds); kokkos_args: Kokkos'
own settings, e.g. ["--kokkos-tools-libs=..."]. Only before any other call.)");
  module.def("finalize", &finalize, "Stops Kokkos (registered to run at interpreter exit).");
  module.def("is_initialized", [] { return Kokkos::is_initialized(); });
  module.def("threads", [] {
    if (python::KokkosThread::forked()) return 1;  // cvest.multiply's calling thread
    return on_kokkos_thread([] {
      ensure_initialized();
      return Kokkos::DefaultHostExecutionSpace().concurrency();
    });
  }, "The host threads cvest's kernels run on (starts Kokkos if needed).");

  module.def("_caller_thread_limit", [] {
    if (python::KokkosThread::forked() && !caller_limit.load()) return caller_floor_bytes;  // nothing to measure with
    return caller_limit.load() ? caller_limit.load() : measure_caller_limit();
  },
             "discount's bytes below which multiply computes on the calling thread (measured once; for tests and "
             "bench/python_small.py).");
  module.def("_multiply", &multiply_arrays, py::arg("multby"), py::arg("discount"), py::arg("out") = py::none(),
             py::arg("strategy") = "flat", py::arg("layout") = std::nullopt, py::arg("staged") = false,
             "cvest.multiply's general path (every argument and error); cvest.multiply takes the common call "
             "first.");
  add_fast_multiply(module);

  module.def("run", &run_deck_file, py::arg("deck"), py::arg("set") = py::dict(), py::arg("plan") = false,
             py::arg("no_resume") = false,
             R"(Runs a deck file exactly as `cvest run DECK` does; returns the report
(the content of the deck's JSON report) as a dict.
set: {"section.key": value} overrides, as --set (e.g. {"run.strategy": "flat"}).
plan: only check and plan (as --plan); nothing is written.
no_resume: start over rather than resume a killed run's output.
Raises cvest.InputError (a ValueError) for a bad deck or input,
cvest.IoError (an OSError) when reading or writing fails,
cvest.VerifyError when a job's output differs from another's.)");

  module.def("verify", &run_verify, py::arg("output"), py::arg("input") = std::nullopt, py::arg("deck") = std::nullopt,
             py::arg("memory_budget") = std::nullopt,
             R"(Recomputes an output from its input and compares bit for bit, as
`cvest verify`. input: the input file (default: the deck's); deck: take
the input, dataset names and budget from it (else the names the output
records). One of the two is needed.
Returns True; raises cvest.VerifyError naming the first difference.)");

  py::class_<BenchServer>(module, "BenchServer", R"(cvest bench's arrays, allocated and every strategy
checked once, then timed on demand: what `cvest bench --serve` answers, in
this process, so a script can interleave cvest's own timing with others'.)")
      .def(py::init(&make_bench_server), py::arg("dates") = 100, py::arg("ids") = 400000, py::arg("cols") = 5,
           py::arg("strategies") = std::nullopt, py::arg("layouts") = std::vector<std::string>{"right", "left"},
           py::arg("precision") = "f64")
      .def("describe", [](const BenchServer& s) {
        return on_kokkos_thread([&] { return s.server ? s.server->describe() : std::string("released"); });
      })
      .def("warm", [](BenchServer& s, double seconds) { return server_command(s, "warm " + std::to_string(seconds)); },
           py::arg("seconds"), "Every variant and the roof in turn until `seconds` have passed.")
      .def("time", [](BenchServer& s, const std::string& strategy, const std::string& layout) {
             return server_command(s, "time " + strategy + " " + layout);
           }, py::arg("strategy"), py::arg("layout"), "One fenced pass: {strategy, layout, seconds, GBps, streaming_stores}.")
      .def("roof", [](BenchServer& s) { return server_command(s, "roof"); },
           "One copy with regular and one with streaming stores of the first layout's kernel bytes (its discount "
           "into its cv, its multBy read), GB/s of those bytes as time() counts: {copy_GBps, copy_streaming_GBps, arrays}.")
      .def("touch", [](BenchServer& s) { return server_command(s, "touch"); }, "Every array once, untimed use.");

  module.def("bench", &run_bench, py::arg("dates") = 100, py::arg("ids") = 400000, py::arg("cols") = 5,
             py::arg("strategies") = std::nullopt,
             py::arg("layouts") = std::vector<std::string>{"right", "left"},
             py::arg("precisions") = std::vector<std::string>{"f64"}, py::arg("repeats") = 5,
             py::arg("warm_seconds") = 3.0,
             R"(The in-memory benchmark of `cvest bench`: every strategy x layout x
precision, warmed, interleaved and repeated, against the copy roof measured
in the same run. Returns its JSON report as a dict (results, roof, build).)");
}
