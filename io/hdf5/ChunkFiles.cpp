#include "io/hdf5/ChunkFiles.hpp"

#include "io/hdf5/FloatingPointMode.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cvest::io {

Index chunk_ids_of(const PropList& create, Index K) {
  hsize_t chunk[3] = {0, 0, 0};
  if (H5Pget_layout(create.get()) != H5D_CHUNKED || H5Pget_chunk(create.get(), 3, chunk) != 3 || chunk[0] != 1 ||
      Index(chunk[2]) != K)
    return 0;
  return Index(chunk[1]);
}

std::vector<Filter> filters_of(const PropList& create) {
  std::vector<Filter> filters;
  for (int f = 0, n = H5Pget_nfilters(create.get()); f < n; ++f) {
    char name[64] = {};
    unsigned flags = 0, config = 0;
    std::vector<unsigned> values(16);
    std::size_t nvalues = values.size();
    const H5Z_filter_t id =
        H5Pget_filter2(create.get(), unsigned(f), &flags, &nvalues, values.data(), sizeof name, name, &config);
    values.resize(std::min(nvalues, values.size()));
    filters.push_back({id, name[0] ? name : "filter", std::move(values)});
  }
  return filters;
}

const Filter* missing_in_hdf5(const std::vector<Filter>& filters) {
  const KeepFloatingPointMode keep;
  for (const Filter& f : filters)
    if (H5Zfilter_avail(f.id) <= 0) return &f;
  return nullptr;
}

bool hdf5_decodes(const Dataset& ds) { return !missing_in_hdf5(filters_of(PropList(H5Dget_create_plist(ds.get())))); }

namespace {

bool chunk_base_of(const Dataset& ds, int fd, std::uint64_t file_size, haddr_t userblock, haddr_t& base) {
  base = userblock;
  Dataspace all(H5Dget_space(ds.get()));
  hsize_t nchunks = 0;
  if (H5Dget_num_chunks(ds.get(), all.get(), &nchunks) < 0) return false;
  if (nchunks == 0) return true;  // nothing to read yet
  hsize_t offset[H5S_MAX_RANK] = {};
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  if (H5Dget_chunk_info(ds.get(), all.get(), 0, offset, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || size == 0 ||
      size > file_size)  // a damaged record: not allocated, HDF5 reads (and reports) it
    return false;
  // H5Dread_chunk copies as many bytes as the record its own lookup finds,
  // which in a damaged index need not be the record just listed, whatever
  // H5Dget_chunk_storage_size says (the input fuzzer's file: 2,928 bytes
  // copied for a record of 112). What it copies comes from the file, so it
  // reads into a mapping of the file's size: address space, touched only
  // where written. More than the record is damage.
  const std::size_t mapped = std::size_t(std::max<std::uint64_t>(file_size, size)) + sizeof(std::uint64_t);
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return false;
  const std::unique_ptr<void, std::function<void(void*)>> unmap(mapping, [mapped](void* m) { ::munmap(m, mapped); });
  unsigned char* hdf5s = static_cast<unsigned char*>(mapping);
  const std::uint64_t canary = 0x6376657374636876u;
  std::memcpy(hdf5s + size, &canary, sizeof canary);
  std::uint32_t filter_mask = 0;
  if (H5Dread_chunk(ds.get(), H5P_DEFAULT, offset, &filter_mask, hdf5s) < 0 ||
      std::memcmp(hdf5s + size, &canary, sizeof canary) != 0)
    return false;
  std::vector<unsigned char> ours(size);
  for (const haddr_t candidate : {userblock, haddr_t(0)}) {
    const ssize_t got = ::pread(fd, ours.data(), size, off_t(addr + candidate));
    if (got == ssize_t(size) && std::memcmp(ours.data(), hdf5s, size) == 0) {
      base = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace

bool file_bytes_of(const Dataset& ds, bool writable, FileBytes& out) {
  File file(H5Iget_file_id(ds.get()));
  if (!file) return false;
  PropList access(H5Fget_access_plist(file.get()));
  if (!access || H5Pget_driver(access.get()) != H5FD_SEC2) return false;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file.get(), access.get(), &handle) < 0 || !handle) return false;
  const int hdf5_fd = *static_cast<const int*>(handle);
  // The same file opened again: a descriptor with its own offset and advice.
  int fd = ::open(("/proc/self/fd/" + std::to_string(hdf5_fd)).c_str(), (writable ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) fd = ::fcntl(hdf5_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  struct stat st {};
  const std::uint64_t size = ::fstat(fd, &st) == 0 ? std::uint64_t(st.st_size) : 0;
  hsize_t userblock = 0;
  PropList create(H5Fget_create_plist(file.get()));
  if (!create || H5Pget_userblock(create.get(), &userblock) < 0) userblock = 0;
  haddr_t base = 0;
  if (userblock > 0 && H5Pget_layout(PropList(H5Dget_create_plist(ds.get())).get()) == H5D_CHUNKED &&
      !chunk_base_of(ds, fd, size, haddr_t(userblock), base)) {
    ::close(fd);
    return false;
  }
  out = {fd, base, size};
  return true;
}

std::string chunk_text(const std::string& shown, int rank, const std::array<Index, 3>& origin,
                       const std::array<Index, 3>& chunk) {
  const auto [t, i, k] = origin;
  return shown + ": chunk at (" + (rank == 3 ? std::to_string(t) + ", " : std::string()) + std::to_string(i) + ", " +
         std::to_string(k) + ") (" +
         (rank == 3 ? "dates " + std::to_string(t) + "-" + std::to_string(t + chunk[0] - 1) + ", " : std::string()) +
         "ids " + std::to_string(i) + "-" + std::to_string(i + chunk[1] - 1) + ")";
}

// The origins (dates, ids, columns) of the chunks of extent `chunk` that a
// block of a dataset with K columns touches, in the file's order.
std::vector<std::array<Index, 3>> chunk_origins(const Block& b, const std::array<Index, 3>& chunk, Index K) {
  const auto [ct, ci, ck] = chunk;
  std::vector<std::array<Index, 3>> origins;
  for (Index tc = b.dates.begin - b.dates.begin % ct; tc < b.dates.end; tc += ct)
    for (Index ic = b.ids.begin - b.ids.begin % ci; ic < b.ids.end; ic += ci)
      for (Index kc = 0; kc < K; kc += ck) origins.push_back({tc, ic, kc});
  return origins;
}

// HDF5's record of the chunk at `origin` of a dataset of `rank` (2: ids and
// columns only); false where it is not stored.
bool chunk_record(hid_t ds, int rank, const std::array<Index, 3>& origin, unsigned& mask, haddr_t& addr,
                  hsize_t& stored) {
  const hsize_t coord3[3] = {hsize_t(origin[0]), hsize_t(origin[1]), hsize_t(origin[2])};
  addr = HADDR_UNDEF;
  return H5Dget_chunk_info_by_coord(ds, rank == 3 ? coord3 : coord3 + 1, &mask, &addr, &stored) >= 0 &&
         addr != HADDR_UNDEF;
}

std::size_t offset_in_block(const Block& b, Index t, Index i, std::size_t row) {
  return (std::size_t((t - b.dates.begin) * b.ids.size()) + std::size_t(i - b.ids.begin)) * row;
}

}  // namespace cvest::io
