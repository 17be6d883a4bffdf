#include "core/Names.hpp"

#include <stdexcept>

namespace cvest {

std::string_view to_string(LayoutKind layout) {
  return layout == LayoutKind::right ? "right" : "left";
}

std::string_view to_string(Precision precision) {
  return precision == Precision::f64 ? "double" : "float";
}

LayoutKind layout_from_name(std::string_view name) {
  if (name == "right" || name == "LayoutRight") return LayoutKind::right;
  if (name == "left" || name == "LayoutLeft") return LayoutKind::left;
  throw std::invalid_argument("unknown layout '" + std::string(name) + "'; valid: right, left");
}

Precision precision_from_name(std::string_view name) {
  if (name == "double" || name == "f64" || name == "float64") return Precision::f64;
  if (name == "float" || name == "f32" || name == "float32") return Precision::f32;
  throw std::invalid_argument("unknown precision '" + std::string(name) + "'; valid: double, float");
}

std::string_view to_string(PipelineKind kind) {
  switch (kind) {
    case PipelineKind::automatic: return "auto";
    case PipelineKind::overlapped: return "overlapped";
    case PipelineKind::per_thread: return "per_thread";
  }
  return "?";
}

PipelineKind pipeline_from_name(std::string_view name) {
  if (name == "auto") return PipelineKind::automatic;
  if (name == "overlapped") return PipelineKind::overlapped;
  if (name == "per_thread") return PipelineKind::per_thread;
  throw std::invalid_argument("unknown pipeline '" + std::string(name) + "'; valid: auto, overlapped, per_thread");
}

std::string_view to_string(Compression compression) {
  switch (compression) {
    case Compression::none: return "none";
    case Compression::gzip: return "gzip";
    case Compression::lzf: return "lzf";
    case Compression::blosc: return "blosc";
    case Compression::bitshuffle_lz4: return "bitshuffle-lz4";
  }
  return "?";
}

Compression compression_from_name(std::string_view name) {
  for (Compression c : {Compression::none, Compression::gzip, Compression::lzf, Compression::blosc,
                        Compression::bitshuffle_lz4})
    if (name == to_string(c)) return c;
  throw std::invalid_argument("unknown compression '" + std::string(name) +
                              "'; valid: none, gzip, lzf, blosc, bitshuffle-lz4");
}

std::string_view to_string(BloscCodec codec) { return codec == BloscCodec::lz4 ? "lz4" : "zstd"; }

BloscCodec blosc_codec_from_name(std::string_view name) {
  if (name == "lz4") return BloscCodec::lz4;
  if (name == "zstd") return BloscCodec::zstd;
  throw std::invalid_argument("unknown codec '" + std::string(name) + "'; valid: lz4, zstd");
}

std::string_view to_string(ShuffleKind shuffle) { return shuffle == ShuffleKind::byte ? "byte" : "bit"; }

ShuffleKind shuffle_from_name(std::string_view name) {
  if (name == "byte") return ShuffleKind::byte;
  if (name == "bit") return ShuffleKind::bit;
  throw std::invalid_argument("unknown shuffle '" + std::string(name) + "'; valid: byte, bit");
}

std::string_view to_string(DirectMode direct) {
  switch (direct) {
    case DirectMode::automatic: return "auto";
    case DirectMode::on: return "true";
    case DirectMode::off: return "false";
  }
  return "?";
}

DirectMode direct_mode_from_name(std::string_view name) {
  if (name == "auto") return DirectMode::automatic;
  if (name == "true") return DirectMode::on;
  if (name == "false") return DirectMode::off;
  throw std::invalid_argument("unknown direct '" + std::string(name) + "'; valid: auto, true, false");
}

std::string_view to_string(ReadBy read_by) {
  switch (read_by) {
    case ReadBy::pread: return "pread";
    case ReadBy::decode: return "decode";
    case ReadBy::hdf5: return "hdf5";
    case ReadBy::none: return "none";
  }
  return "?";
}

std::string_view to_string(StorageLayout layout) {
  switch (layout) {
    case StorageLayout::contiguous: return "contiguous";
    case StorageLayout::chunked: return "chunked";
    case StorageLayout::compact: return "compact";
    case StorageLayout::virtual_dataset: return "virtual";
    case StorageLayout::external: return "external";
  }
  return "?";
}

std::string_view kokkos_name(LayoutKind layout) { return layout == LayoutKind::right ? "LayoutRight" : "LayoutLeft"; }

std::string to_text(const CompressionSpec& spec) {
  switch (spec.kind) {
    case Compression::gzip: return "gzip level " + std::to_string(spec.gzip_level);
    case Compression::blosc:
      return "blosc (" + std::string(to_string(spec.blosc_codec)) + ", " + std::string(to_string(spec.blosc_shuffle)) +
             " shuffle, level " + std::to_string(spec.blosc_level) + ")";
    default: return std::string(to_string(spec.kind));
  }
}

}  // namespace cvest
