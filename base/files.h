// The file helpers every part uses: thin, throwing wrappers over the *at() calls (the
// IPAM store), and whole-file writes that survive a crash (state records, ledgers, caches).
// Every failure becomes base::FileError naming the path, with errno kept.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "base/fd.h"

namespace base::fs {

/// Throws base::FileError("failed to <what> '<path>': <strerror>").
[[noreturn]] void fail_io(const std::string& what, const std::string& path, int err);
/// mkdir -p; existing directories are fine.
void mkdir_p(const std::string& path, mode_t mode);
/// mkdir -p returning the directories it created, outermost first, so that a failed
/// operation can take exactly those away again (remove_dirs).
std::vector<std::string> make_dirs(const std::string& path, mode_t mode);
/// rmdir of each directory in `created`, innermost first; one that is not empty (someone
/// else uses it now) or already gone is left alone.
void remove_dirs(const std::vector<std::string>& created);
/// Whether `path` is a directory with no entry at all.
bool is_empty_dir(const std::string& path);
/// Every name directly under `at` (files, directories, anything), without "." and "..".
std::vector<std::string> list_names(int at, const std::string& shown);
/// The names directly under directory `path` that do not start with '.', sorted; none when
/// it does not exist or cannot be read (sysfs, state directories: absent means empty).
std::vector<std::string> list_dir(const std::string& path);
/// rm -r of `name` under `at`; symlinks are removed, never followed. Missing is fine.
void remove_tree(int at, const std::string& name, const std::string& shown);
/// Opens directory `name` relative to `at` (AT_FDCWD for a plain path).
base::UniqueFd open_dir(int at, const std::string& name, const std::string& shown);
/// Creates directory `name` under `at` when missing, then opens it.
base::UniqueFd make_dir(int at, const std::string& name, const std::string& shown, mode_t mode);
/// Up to `max` bytes of a file; nullopt when it does not exist. Symlinks are not followed.
std::optional<std::string> read_at(int at, const std::string& name, const std::string& shown, size_t max = 4096);
/// Creates `name` exclusively (0600) and writes `data`; fsyncs it when `durable`. A failed
/// write or sync removes the file again.
void create_file(int at, const std::string& name, std::string_view data, const std::string& shown, bool durable);
/// Writes `data` over the start of `name` (created 0600 when missing, never followed if a
/// symlink), then cuts off whatever was beyond it. No truncate to zero first: on ext4 that
/// starts writeback of the file (auto_da_alloc).
void write_in_place(int at, const std::string& name, std::string_view data, const std::string& shown);
/// Whether `name` exists under `at` (any file type).
bool exists_at(int at, const std::string& name, const std::string& shown);
/// unlinkat; a missing file is not an error.
void remove_at(int at, const std::string& name, const std::string& shown);
/// fsync of a file or directory fd.
void sync(int fd, const std::string& shown);
/// Names of the regular files directly under `at`.
std::vector<std::string> list_files(int at, const std::string& shown);

// --- whole files by path, durable (state records, caches, ledgers) ---

/// Replaces `path` atomically and durably: write a temp file beside it, fsync, rename,
/// fsync the directory. Creates the directory (0700) when missing and returns the
/// directories it created, outermost first. FileError on failure. Not `durable`: the same
/// without the two fsyncs (still atomic), for files rebuilt from others after a crash.
std::vector<std::string> write_file(const std::string& path, const std::string& data, unsigned mode = 0600,
                                    bool durable = true);
/// Content of `path`; nullopt when it does not exist. FileError on other errors.
std::optional<std::string> read_file(const std::string& path);
/// Creates `path` with `data` unless it exists (never replaces): temp file, fsync, link,
/// fsync of the directory, which is created (`dir_mode`) when missing. False when the
/// file already existed. Not `durable`: the same without the two fsyncs (still atomic: a
/// reader sees the whole content or no file), for files rebuilt from others after a crash.
bool create_once(const std::string& path, const std::string& data, unsigned mode, unsigned dir_mode, bool durable = true);
/// The directories mkdir -p of `dir` would create now, outermost first.
std::vector<std::string> missing_dirs(const std::string& dir);
/// Removes `path` and fsyncs its directory (not `durable`: without); a missing file is fine.
void remove_file(const std::string& path, bool durable = true);

}  // namespace base::fs
