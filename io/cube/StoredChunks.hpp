#pragma once
// An output block's chunks as they go into the file, compressed by cvest's
// threads through the filters of io/codecs/, outside HDF5's global lock: the
// threads of the per-thread pipeline each compress their own blocks, and a
// reader never waits for a compression.
#include "core/Names.hpp"
#include "core/Plan.hpp"
#include "io/codecs/Codec.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace cvest::io {

// The filters an output's chunks go through, in pipeline order, each with
// the record it is created with (Codec::values: what its decoder reads).
struct ChunkCoding {
  std::vector<const Codec*> codecs;
  std::vector<FilterUse> uses;
};
ChunkCoding chunk_coding(const CompressionSpec& spec, std::size_t element, std::size_t chunk_bytes);

// What coding chunks took, summed over the threads that did it.
struct CodingStats {
  std::atomic<std::uint64_t> plain_bytes{0}, stored_bytes{0}, nanoseconds{0};
  // "1.62 GB coded into 0.52 GB (0.32x) at 1.55 GB/s a thread": empty where nothing was.
  std::string text() const;
};

// A chunk as it goes into the file: its first date and id, the bytes as
// stored (nullptr where compressing failed: `error` says why) and
// H5Dwrite_chunk's mask of the filters skipped (those that could not make
// it smaller).
struct StoredChunk {
  Index t, i;
  const unsigned char* data;
  std::size_t bytes;
  unsigned skipped;
  std::string error;
};
// "(t, i, 0)": where a stored chunk starts, for messages.
std::string origin_text(const StoredChunk& c);

// A block of whole (1, chunk_ids, K) chunks (`chunk`: their extent) of
// `element`-byte values, C order in `buffer`, handed to `store` as stored
// chunks, in order; the last, partial chunk of a date padded with zeros to
// a whole one. Called from outside a parallel region (the overlapped
// pipeline's writer thread), a block's chunks are compressed by an OpenMP
// team, then stored in order. Scratch buffers are per thread.
// `stats` (may be null) counts the coding.
void store_chunks(const ChunkCoding& coding, Index K, std::size_t element, const std::array<Index, 3>& chunk,
                  const Block& b, const void* buffer, const std::function<void(const StoredChunk&)>& store,
                  CodingStats* stats = nullptr);

}  // namespace cvest::io
