#include "io/cube/StoredChunks.hpp"

#include "io/hdf5/ChunkFiles.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace cvest::io {

std::string origin_text(const StoredChunk& c) { return fmt::format("({}, {}, 0)", c.t, c.i); }

ChunkCoding chunk_coding(const CompressionSpec& spec, std::size_t element, std::size_t chunk_bytes) {
  ChunkCoding coding;
  coding.codecs = pipeline_for(spec);
  for (const Codec* c : coding.codecs) coding.uses.push_back({c->values(spec, element, chunk_bytes, false), element});
  return coding;
}

namespace {

// `bytes` of `src` through every filter in turn into `out`; a filter that
// cannot make them fewer is skipped (its mask bit set). Returns the bytes.
std::size_t encode_chunk(const ChunkCoding& coding, const unsigned char* src, std::size_t bytes,
                         std::vector<unsigned char>& out, unsigned& skipped) {
  thread_local std::vector<unsigned char> steps[2];
  const unsigned char* data = src;
  std::size_t size = bytes;
  for (std::size_t f = 0, next = 0; f < coding.codecs.size(); ++f) {
    std::vector<unsigned char>& into = f + 1 == coding.codecs.size() ? out : steps[next];
    const std::size_t put = coding.codecs[f]->encode(data, size, coding.uses[f], into);
    if (put == 0) {
      skipped |= 1u << f;
      continue;
    }
    data = into.data();
    size = put;
    next ^= 1;
  }
  if (data != out.data()) out.assign(data, data + size);
  return size;
}

}  // namespace

std::string CodingStats::text() const {
  const double plain = double(plain_bytes.load()), stored = double(stored_bytes.load()),
               seconds = double(nanoseconds.load()) * 1e-9;
  if (plain <= 0 || seconds <= 0) return "";
  return fmt::format("{:.2f} GB coded into {:.2f} GB ({:.2f}x) at {:.2f} GB/s a thread", plain / 1e9, stored / 1e9,
                     stored / plain, plain / seconds / 1e9);
}

void store_chunks(const ChunkCoding& coding, Index K, std::size_t es, const std::array<Index, 3>& chunk,
                  const Block& b, const void* buffer, const std::function<void(const StoredChunk&)>& store,
                  CodingStats* stats) {
  const auto* bytes = static_cast<const unsigned char*>(buffer);
  const std::size_t chunk_bytes = std::size_t(chunk[1] * K) * es;
  std::vector<StoredChunk> pieces;
  for (Index t = b.dates.begin; t < b.dates.end; ++t)
    for (Index i = b.ids.begin; i < b.ids.end; i += chunk[1]) pieces.push_back({t, i, nullptr, 0, 0, {}});
  // The chunk's bytes as stored: through the filters into `out`, or in
  // place where there are none. Never throws (it runs in OpenMP teams).
  const auto prepare = [&](StoredChunk& p, std::vector<unsigned char>& out) {
    thread_local std::vector<unsigned char> pad;
    const Index ids = std::min(chunk[1], b.ids.end - p.i);
    const unsigned char* src = bytes + offset_in_block(b, p.t, p.i, std::size_t(K) * es);
    try {
      if (ids < chunk[1]) {  // the last, partial chunk travels padded to full size
        pad.resize(chunk_bytes);
        std::memcpy(pad.data(), src, std::size_t(ids * K) * es);
        std::memset(pad.data() + std::size_t(ids * K) * es, 0, chunk_bytes - std::size_t(ids * K) * es);
        src = pad.data();
      }
      p.bytes = chunk_bytes;
      p.data = src;
      if (coding.codecs.empty()) return;
      const auto begin = std::chrono::steady_clock::now();
      p.bytes = encode_chunk(coding, src, chunk_bytes, out, p.skipped);
      p.data = out.data();
      if (stats) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin);
        stats->nanoseconds += std::uint64_t(ns.count());
        stats->plain_bytes += chunk_bytes;
        stats->stored_bytes += p.bytes;
      }
    } catch (...) {  // nothing may leave an OpenMP team
      p.data = nullptr;
      try {
        throw;
      } catch (const std::exception& e) {
        try {
          p.error = e.what();
        } catch (...) {
        }
      } catch (...) {
      }
    }
  };
#ifdef _OPENMP
  if (!coding.codecs.empty() && pieces.size() > 1 && !omp_in_parallel()) {
    // This thread's buffers, named before the team starts: inside it a
    // thread_local name would be each team thread's own.
    thread_local std::vector<std::vector<unsigned char>> packed_by_writer;
    auto& packed_ahead = packed_by_writer;
    packed_ahead.resize(std::max(packed_ahead.size(), pieces.size()));
    const long n = long(pieces.size());
#pragma omp parallel for schedule(dynamic)
    for (long k = 0; k < n; ++k) prepare(pieces[std::size_t(k)], packed_ahead[std::size_t(k)]);
    for (const StoredChunk& p : pieces) store(p);
    return;
  }
#endif
  thread_local std::vector<unsigned char> compressed;
  for (StoredChunk& p : pieces) {
    prepare(p, compressed);
    store(p);
  }
}

}  // namespace cvest::io
