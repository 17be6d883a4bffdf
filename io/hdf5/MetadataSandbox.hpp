#pragma once
// Damaged HDF5 metadata read first in a process of its own, where a crash
// or a runaway allocation costs that process, not the run.
#include <string>
#include <vector>

namespace cvest::io {

// HDF5 1.10.8 crashes (SIGSEGV) on some damaged metadata instead of
// reporting an error: a group's local heap whose data address is undefined
// (found by the input fuzzer; h5py crashes on such a file too), and nothing
// short of parsing HDF5's format could tell beforehand. So the metadata that
// opening `datasets` reads (the superblock, the groups on their paths, each
// dataset's object header, type, dataspace, filters and attributes, its
// whole chunk index) is read first in a child process. InputError naming the
// file, the dataset and the signal when that child dies, or when HDF5 fails
// to allocate memory there (the child may take 1 GiB more than it had: a
// damaged length made HDF5 allocate and zero 4 GiB); other errors HDF5
// reports there are left to the caller's own checks. Where no child can be made, or
// one is still reading after a minute, the file is read here as before.
void check_metadata_in_child(const std::string& path, const std::vector<std::string>& datasets);

}  // namespace cvest::io
