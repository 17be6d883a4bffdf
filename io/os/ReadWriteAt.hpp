#pragma once
// Reads and writes at file offsets, whole: what every path that moves bytes
// by itself (the cube's, the direct reader's and writer's, small files')
// shares.
#include <cstddef>
#include <string>
#include <sys/types.h>

namespace cvest::io {

// pread of all `bytes` at `at` of `fd`, retried where interrupted or short;
// IoError naming `shown` (a file that ends first: "file is truncated").
void read_at(int fd, void* buffer, std::size_t bytes, off_t at, const std::string& shown);
// pwrite of all `bytes` at `at`, retried where interrupted or short; IoError
// naming `shown` (ENOSPC said as a full disk). The output's writes, where
// CVEST_FAULT's write and write_eio points fail them (io/os/Faults.hpp).
void write_at(int fd, const void* buffer, std::size_t bytes, off_t at, const std::string& shown);
// One pwrite, the same fault points applied: bytes written, or -1 with errno
// set (the caller retries or reports, as write_at does).
ssize_t pwrite_once(int fd, const void* buffer, std::size_t bytes, off_t at);
// write_at's IoError for a pwrite that returned `put` (errno set when < 0).
[[noreturn]] void throw_write_failed(ssize_t put, const std::string& shown);

}  // namespace cvest::io
