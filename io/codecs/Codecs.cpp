// The table of cvest's codecs (io/codecs/Codec.hpp): which HDF5 filter each
// one is, and the filters each [output] compression stores its chunks with.
#include "io/codecs/Codecs.hpp"

namespace cvest::io {

namespace {

const Codec* const all_codecs[] = {&shuffle_codec(), &deflate_codec(), &lzf_codec(), &blosc_codec(),
                                   &bitshuffle_lz4_codec()};

}  // namespace

const Codec* codec_for(H5Z_filter_t id) {
  for (const Codec* c : all_codecs)
    if (c->id() == id) return c;
  return nullptr;
}

std::vector<const Codec*> pipeline_for(const CompressionSpec& spec) {
  switch (spec.kind) {
    case Compression::none: return {};
    case Compression::gzip: return {&shuffle_codec(), &deflate_codec()};
    case Compression::lzf: return {&shuffle_codec(), &lzf_codec()};
    case Compression::blosc: return {&blosc_codec()};  // its shuffle inside
    case Compression::bitshuffle_lz4: return {&bitshuffle_lz4_codec()};
  }
  return {};
}

std::string codecs_text() {
  std::string text;
  for (const Codec* c : all_codecs) text += (text.empty() ? "" : ", ") + c->library();
  return text;
}

}  // namespace cvest::io
