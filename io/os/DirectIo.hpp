#pragma once
// What direct reads (io/os/DirectReader.hpp) and direct writes
// (io/os/DirectWriter.hpp) share: the alignment O_DIRECT wants, and a second
// descriptor of a file opened with it, or why not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace cvest::io {

// What direct I/O keeps aligned: offsets, lengths and memory. Every
// logical block size Linux devices have (512, 4096) divides it.
inline constexpr std::size_t direct_alignment = 4096;

inline off_t align_down(off_t at) { return at - at % off_t(direct_alignment); }
inline off_t align_up(off_t at) { return align_down(at + off_t(direct_alignment) - 1); }
inline bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % direct_alignment == 0; }

// The type of the file system `fd` is on ("ext4", "tmpfs", "type 0x..."),
// "" where fstatfs fails.
std::string file_system_type(int fd);
// "its file system (ext4)", or "its file system" where the type is unknown: for messages.
std::string file_system_of(int fd);

// A second descriptor of the file `fd` with O_DIRECT and `access`
// (O_RDONLY, O_WRONLY): O_DIRECT set on a duplicate would apply to the
// buffered one too (they would share the open file). -1 with errno where
// it cannot be opened so.
int reopen_direct(int fd, int access);
// Why a file cannot be opened with O_DIRECT, from reopen_direct's errno:
// "its file system (ramfs) refuses O_DIRECT" (EINVAL), else the error.
std::string why_not_direct(int fd, int error);

}  // namespace cvest::io
