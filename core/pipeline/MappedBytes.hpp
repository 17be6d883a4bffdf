#pragma once
// Host memory mapped on its own (anonymous mmap), outside malloc's heaps, for
// the pipeline's buffers kept from job to job (core/pipeline/Pipeline.hpp
// BufferCache, host builds). Freed, its pages go back at once; kept out of
// the heaps, it leaves no holes among the codecs' working memory (zstd's
// 3.5 MiB a chunk, made and freed per chunk under glibc's 4 MiB mapping
// threshold): a Blosc-zstd output under the overlapped pipeline peaked at
// 114-116 MiB of RSS with its buffers from malloc under Kokkos 4.6 (104-106
// under 3.4) for the same 67 MiB of live allocations; mapped, 105-107 (4.6)
// and 103-107 (3.4) (peer.budget_rss).
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace cvest {

// Page-aligned, zero-filled on first touch; unmapped when the last owner goes.
inline std::shared_ptr<unsigned char> map_bytes(std::size_t bytes) {
  bytes = bytes ? bytes : 1;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<unsigned char>(static_cast<unsigned char*>(p), [bytes](unsigned char* q) { ::munmap(q, bytes); });
}

// The pages of [p, p + bytes) faulted in writable now, on the calling
// thread (first touch: its NUMA node), so that the first write into them
// pays no faults: MADV_POPULATE_WRITE; where the kernel lacks it (before
// Linux 5.14), a zero written into each page. For memory whose contents do
// not matter yet.
inline void fault_in(void* p, std::size_t bytes) {
  if (bytes == 0) return;
  const std::size_t page = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(p), end = begin + bytes;
  const std::uintptr_t first = begin / page * page;
#ifdef MADV_POPULATE_WRITE
  if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) == 0) return;
#endif
  auto* bytes_at = static_cast<volatile unsigned char*>(p);
  for (std::uintptr_t a = begin; a < end; a = (a / page + 1) * page) bytes_at[a - begin] = 0;
}

}  // namespace cvest
