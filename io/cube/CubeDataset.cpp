#include "io/cube/CubeDataset.hpp"

#include "core/Errors.hpp"
#include "io/hdf5/ChunkFiles.hpp"
#include "io/hdf5/FloatingPointMode.hpp"

namespace cvest::io {

namespace {

// The filters as the new dataset records them: a plugin's set_local (run
// where this process's HDF5 has loaded it) may rewrite a record; cvest codes
// chunks by the record, so it must name the element's bytes cvest writes.
void check_filters_recorded(const Dataset& ds, const std::vector<const Codec*>& filters, std::size_t es,
                            const std::string& shown) {
  const auto recorded = filters_of(PropList(H5Dget_create_plist(ds.get())));
  bool same = recorded.size() == filters.size();
  for (std::size_t f = 0; same && f < filters.size(); ++f) {
    same = recorded[f].id == filters[f]->id() && filters[f]->decodes(recorded[f].values);
    const auto& v = recorded[f].values;
    if (same && filters[f]->id() == 32008) same = v.size() >= 5 && v[2] == es && v[4] == 2;  // bitshuffle: element, LZ4
    if (same && filters[f]->id() == 32001) same = v.size() >= 7 && v[2] == es;  // blosc: element .. compressor
  }
  if (!same) throw IoError(shown + ": HDF5 (a filter plugin) recorded the output's filters otherwise than cvest writes them");
}

}  // namespace

Dataset create_dataset(const File& file, const std::string& name, Precision precision, const std::vector<hsize_t>& dims,
                       const std::vector<hsize_t>& chunk, const CompressionSpec& compression, const std::string& shown) {
  Dataspace space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  PropList create(H5Pcreate(H5P_DATASET_CREATE));
  // No creation and modification times in the object header: the same job
  // writes the same bytes, whenever and on however many ranks it runs.
  check(H5Pset_obj_track_times(create.get(), false), "H5Pset_obj_track_times", shown);
  check(H5Pset_chunk(create.get(), int(chunk.size()), chunk.data()), "H5Pset_chunk", shown);
  hsize_t chunk_elements = 1;
  for (const hsize_t c : chunk) chunk_elements *= c;
  const std::size_t es = element_size(precision), chunk_bytes = std::size_t(chunk_elements) * es;
  const auto filters = pipeline_for(compression);
  for (const Codec* codec : filters) {
    // A filter HDF5 lacks can still be named (cvest stores chunks it coded
    // itself); one a plugin brings is asked first, so the record passed is
    // what its set_local expects.
    const bool registered = [&] {
      const KeepFloatingPointMode keep;
      return H5Zfilter_avail(codec->id()) > 0;
    }();
    const auto values = codec->values(compression, es, chunk_bytes, registered);
    check(H5Pset_filter(create.get(), codec->id(), H5Z_FLAG_OPTIONAL, values.size(), values.data()), "H5Pset_filter",
          shown);
  }
  // Nothing is pre-filled. Uncompressed chunks are allocated up front, so
  // their addresses are known and blocks can be written with pwrite.
  check(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time", shown);
  if (compression.kind == Compression::none)
    check(H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time", shown);
  const hid_t type = precision == Precision::f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  PropList link(H5Pcreate(H5P_LINK_CREATE));
  // "results/cv": the group comes with it.
  check(H5Pset_create_intermediate_group(link.get(), 1), "H5Pset_create_intermediate_group", shown);
  Dataset ds(H5Dcreate2(file.get(), name.c_str(), type, space.get(), link.get(), create.get(), H5P_DEFAULT));
  if (!ds) throw IoError(shown + ": cannot create dataset '" + name + "'");
  check_filters_recorded(ds, filters, es, shown);
  return ds;
}

void write_input_cube(const File& file, const std::string& path, Precision precision, Index T, Index N, Index K,
                      const std::function<const void*(int stream, Index date)>& values, const std::string& generator) {
  const hsize_t ids = hsize_t(cube_chunk(N, K, element_size(precision))[1]);
  const hsize_t t = hsize_t(T), n = hsize_t(N), k = hsize_t(K);
  Dataset m = create_dataset(file, "multBy", precision, {n, k}, {ids, k}, CompressionSpec{}, path);
  Dataset d = create_dataset(file, "discount", precision, {t, n, k}, {1, ids, k}, CompressionSpec{}, path);
  const auto write = [&](const Dataset& ds, const char* name, const std::vector<Index>& start,
                         const std::vector<Index>& count, const void* buffer) {
    write_hyperslab(ds, native_type(precision), start, count, buffer, path + ": dataset '" + name + "'");
  };
  write(m, "multBy", {0, 0}, {N, K}, values(0, 0));
  for (Index date = 0; date < T; ++date) write(d, "discount", {date, 0, 0}, {1, N, K}, values(1, date));
  write_string_attribute(d.get(), "generator", generator);
}

}  // namespace cvest::io
