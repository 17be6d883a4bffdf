#pragma once
// Paths and disks around cvest's outputs: whether an output may be written
// (or replaced) there, and whether the file system can take it.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace cvest::io {

// Refuses to proceed when `path` exists and overwrite is false, when it is
// a symbolic link (a finished file is renamed onto its path, which would
// replace the link, not write where it points), or when its directory
// cannot be written, or (overwrite) when the file there cannot be replaced
// by this user (replace_refusal: IoError, before any work). InputError /
// IoError naming the path. Makes
// the directory unless create_dir is false (then the nearest existing one
// above must be writable).
// `to_replace` says how to allow replacing it (a deck key, a flag).
void check_output_path(const std::string& path, bool overwrite, bool create_dir = true,
                       const std::string& to_replace = "set [output] overwrite = true");

// Refuses to start a file of `bytes` that the file system holding `path`
// cannot take (IoError naming the path, what it needs and what is free), so a
// job that would fill the disk an hour in stops in its first second. Does
// nothing where the free space cannot be read.
void check_free_space(const std::string& path, double bytes);
// The same for several files at once: those on one file system must fit it
// together (an input to generate and the output beside it), so a job does
// not spend an hour generating its input only to find no room for its output.
// Names them all, what they need together and what is free.
void check_free_space(const std::vector<std::pair<std::string, double>>& files);


// Bytes free for an unprivileged user on the file system that would hold a
// file at `path`; -1 when that cannot be read.
double free_space(const std::string& path);

// Why the file at `path` cannot be replaced by this user (a sticky folder
// and another owner, an immutable or append-only file), naming its owner;
// empty where it can (or nothing is there).
std::string replace_refusal(const std::string& path);

// The directory an output at `path` goes in.
std::filesystem::path output_dir(const std::string& path);
// The nearest directory at or above `dir` that exists: where a directory not
// made yet would be made, and so the file system it would be on.
std::filesystem::path existing_ancestor(std::filesystem::path dir);

}  // namespace cvest::io
