// Lab bench (issue 35): does a streaming copy's speed depend on which
// register its loads take as their base? On an Intel Xeon VM (family 6
// model 167) the same loop ran at 32 GB/s with RBP as the base and at 45-46
// with any other (docs/benchmarks.md), which is why cvest builds with
// -fno-omit-frame-pointer (RBP never a data pointer). Each variant is one
// loop in inline assembly, so only the base register differs: loads of 16
// bytes (MOVUPS), streaming stores (MOVNTPS), every OpenMP thread copying
// one contiguous share; every variant once per repeat, in turn, the first
// repeat dropped; each copy checked. Standalone (OpenMP, x86-64); run by
// run.sh.
//
//   rbp_loads GB REPEATS
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// out[0, bytes) = in[0, bytes), 16 bytes an iteration, the load based on
// register BASE. The inputs sit in fixed registers (out RDI, in RAX, the
// count RBX, none of them written); RSI is declared clobbered, RBP and R13
// are pushed and popped, below the red zone the compiler may keep data in.
#define CVEST_COPY_LOOP(NAME, BASE, ADDRESS)                                                        \
  __attribute__((noinline)) void NAME(char* out, const char* in, std::size_t bytes) {            \
    const std::size_t n = bytes / 4;                                                            \
    asm volatile("sub $128, %%rsp\n push %%rbp\n push %%r13\n mov %%rax, %%" BASE "\n"            \
                 " xor %%rcx, %%rcx\n lea (%%rdi), %%rdx\n jmp 2f\n .p2align 6\n 2:\n"               \
                 " movups " ADDRESS ", %%xmm0\n add $4, %%rcx\n add $16, %%rdx\n"                    \
                 " movntps %%xmm0, -0x10(%%rdx)\n cmp %%rbx, %%rcx\n jb 2b\n sfence\n"               \
                 " pop %%r13\n pop %%rbp\n add $128, %%rsp\n"                                       \
                 :                                                                              \
                 : "D"(out), "a"(in), "b"(n)                                                    \
                 : "rcx", "rdx", "rsi", "xmm0", "memory", "cc");                                \
  }
CVEST_COPY_LOOP(base_rsi, "rsi", "(%%rsi,%%rcx,4)")
CVEST_COPY_LOOP(base_rbp, "rbp", "0x0(%%rbp,%%rcx,4)")
CVEST_COPY_LOOP(base_r13, "r13", "0x0(%%r13,%%rcx,4)")  // a displacement byte forced, as RBP's is
CVEST_COPY_LOOP(base_rsi_disp, "rsi", "0x10(%%rsi,%%rcx,4)")  // RSI with a displacement byte (in - 16 passed)
#undef CVEST_COPY_LOOP

struct Variant {
  const char* name;
  void (*copy)(char*, const char*, std::size_t);
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: rbp_loads GB REPEATS\n");
    return 2;
  }
  const std::size_t bytes = std::size_t(std::atof(argv[1]) * 1e9) / 4096 * 4096;
  const int repeats = std::atoi(argv[2]);
  if (bytes == 0 || repeats < 2) {
    std::fprintf(stderr, "rbp_loads: GB > 0 and REPEATS >= 2 expected\n");
    return 2;
  }
  char* in = static_cast<char*>(std::aligned_alloc(std::size_t(1) << 21, bytes));
  char* out = static_cast<char*>(std::aligned_alloc(std::size_t(1) << 21, bytes));
  if (!in || !out) return 1;
  madvise(in, bytes, MADV_HUGEPAGE), madvise(out, bytes, MADV_HUGEPAGE);
  std::memset(in, 1, bytes), std::memset(out, 2, bytes);
  // base_rsi_disp loads at 16 bytes past its base: given `in` - 16
  const auto rsi_disp = [](char* o, const char* i, std::size_t b) {
    base_rsi_disp(o, reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(i) - 16), b);
  };
  const Variant variants[] = {{"load base RSI", base_rsi},
                              {"load base RBP", base_rbp},
                              {"load base R13", base_r13},
                              {"RSI + 16", rsi_disp}};
  std::vector<std::vector<double>> rates(std::size(variants));
  for (int r = 0; r < repeats; ++r)
    for (std::size_t v = 0; v < std::size(variants); ++v) {
      const double t0 = now();
#pragma omp parallel
      {
        const std::size_t t = omp_get_thread_num(), P = omp_get_num_threads(), lo = bytes * t / P / 64 * 64,
                          hi = t + 1 == P ? bytes : bytes * (t + 1) / P / 64 * 64;
        variants[v].copy(out + lo, in + lo, hi - lo);
      }
      const double s = now() - t0;
      if (r > 0) rates[v].push_back(2 * double(bytes) / s / 1e9);
      if (std::memcmp(out, in, bytes) != 0) {
        std::fprintf(stderr, "rbp_loads: %s copied wrong bytes\n", variants[v].name);
        return 1;
      }
      std::memset(out, 2, bytes);  // the next copy writes every byte again
    }
  std::printf("streaming copy of %.2f GB, %d threads, %d repeats (the first dropped), GB/s read + written\n",
              double(bytes) / 1e9, omp_get_max_threads(), repeats);
  for (std::size_t v = 0; v < std::size(variants); ++v) {
    auto x = rates[v];
    std::sort(x.begin(), x.end());
    std::printf("%-14s median %5.1f  min %5.1f  max %5.1f\n", variants[v].name, x[x.size() / 2], x.front(), x.back());
  }
  std::free(in), std::free(out);
}
