// Parsing of the cache's environment variables (StoreOptions::from_env is defined beside these).
// Every parser throws std::invalid_argument naming the variable and the rejected value.
#pragma once

#include "cache/trusted_dir.hpp"

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace flashjit::cache {

// "123", "64K", "512M", "2G" (case-insensitive suffix, powers of 1024). "" -> 0.
std::uint64_t parse_byte_size(std::string_view variable, std::string_view value);

// 1/true/yes/on and 0/false/no/off (case-insensitive); "" -> false.
bool parse_bool(std::string_view variable, std::string_view value);

// A finite, non-negative number of seconds ("300", "0.5").
double parse_seconds(std::string_view variable, std::string_view value);

// ':'-separated directories; empty parts are skipped.
std::vector<std::filesystem::path> parse_path_list(std::string_view value);

// A group name or number the current user belongs to (root: any group).
gid_t parse_group(std::string_view variable, std::string_view value);

// The default writable directory: $XDG_CACHE_HOME/flashjit (absolute XDG only), else
// $HOME/.cache/flashjit, else -- also when that cannot be created, trusted or written --
// <tmp>/flashjit-<uid> (mode 0700, owned by us), else a fresh mkdtemp directory.
std::filesystem::path default_cache_dir(const Sharing& sharing = {});

}  // namespace flashjit::cache
