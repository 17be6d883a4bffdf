#pragma once
// Run-time names for cvest's compile-time choices, free of Kokkos so that
// host-only code (deck parsing) compiles with the host compiler in Cuda builds.
#include "core/Index.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cvest {

// As decks and flags spell them.
enum class LayoutKind { right, left };
enum class Precision { f64, f32 };
// How a file job moves blocks (core/pipeline/Pipeline.hpp): `overlapped` streams them
// read thread -> kernel on every thread -> write thread; `per_thread` gives
// each host thread whole blocks to read, compute and write itself; `automatic`
// (spelled "auto") takes per_thread where it applies, else overlapped.
enum class PipelineKind { automatic, overlapped, per_thread };
// An output's chunks: plain, shuffle + deflate ("gzip"), shuffle + h5py's
// lzf, Blosc (HDF5 filter 32001: lz4 or zstd inside, byte or bit shuffle), or
// bitshuffle + LZ4 (filter 32008, "bitshuffle-lz4"): io/codecs/.
enum class Compression { none, gzip, lzf, blosc, bitshuffle_lz4 };
// The compressor inside a Blosc chunk, and the shuffle before it.
enum class BloscCodec { lz4, zstd };
enum class ShuffleKind { byte, bit };
// How an output's chunks are compressed: the deck's [output] keys.
struct CompressionSpec {
  Compression kind = Compression::none;
  int gzip_level = 4;  // gzip: 1..9
  BloscCodec blosc_codec = BloscCodec::lz4;
  ShuffleKind blosc_shuffle = ShuffleKind::byte;
  int blosc_level = 5;  // blosc: 1..9 (hdf5plugin's default: 5)
};
// How an uncompressed output's data reaches the disk: past the page cache
// (O_DIRECT) where the file system allows it, falling back to the page cache
// where it does not ("auto"); always past it, else an error ("true"); always
// through it ("false").
enum class DirectMode { automatic, on, off };
// Which path reads a dataset (io::CubeStorage): pread straight into the
// block, decoding whole chunks on cvest's threads, HDF5's H5Dread, or none
// (HDF5 lacks a filter the data needs).
enum class ReadBy { pread, decode, hdf5, none };
// How a dataset's data lies in its file (HDF5's layouts; external: in raw
// files beside it, a contiguous layout's variant).
enum class StorageLayout { contiguous, chunked, compact, virtual_dataset, external };

// Bytes per element.
constexpr std::size_t element_size(Precision precision) { return precision == Precision::f64 ? 8 : 4; }

std::string_view to_string(LayoutKind layout);
std::string_view kokkos_name(LayoutKind layout);        // "LayoutRight", "LayoutLeft": for messages
std::string_view to_string(Precision precision);
LayoutKind layout_from_name(std::string_view name);     // throws std::invalid_argument
Precision precision_from_name(std::string_view name);   // throws std::invalid_argument
std::string_view to_string(PipelineKind kind);
PipelineKind pipeline_from_name(std::string_view name);  // throws std::invalid_argument
std::string_view to_string(Compression compression);
Compression compression_from_name(std::string_view name);  // throws std::invalid_argument
std::string_view to_string(BloscCodec codec);                 // "lz4", "zstd"
BloscCodec blosc_codec_from_name(std::string_view name);      // throws std::invalid_argument
std::string_view to_string(ShuffleKind shuffle);              // "byte", "bit"
ShuffleKind shuffle_from_name(std::string_view name);         // throws std::invalid_argument
// "blosc (lz4, byte shuffle, level 5)", "gzip level 4", "bitshuffle-lz4", "none".
std::string to_text(const CompressionSpec& spec);
std::string_view to_string(DirectMode direct);                // "auto", "true", "false"
DirectMode direct_mode_from_name(std::string_view name);    // throws std::invalid_argument
std::string_view to_string(ReadBy read_by);                     // "pread", "decode", "hdf5", "none"
std::string_view to_string(StorageLayout layout);               // "contiguous", ..., "virtual", "external"

}  // namespace cvest
