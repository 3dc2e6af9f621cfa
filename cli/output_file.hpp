// Files the user names for output (generate -o, precompile --json-summary, run --save-o and
// --save-lse). They go where the user said, through links and into devices as any command's
// output does, except where somebody else could have put something at that name first: in a
// sticky directory others can write (/tmp, /dev/shm), a link, file or FIFO already there is
// used only if it belongs to the user, to the directory's owner or to root. These are the
// rules of Linux's fs.protected_symlinks, protected_regular and protected_fifos, which many
// containers leave off; without them a link planted in /tmp makes a command run by root
// overwrite any file.
#pragma once

#include "cache/file_io.hpp"

#include <string>
#include <string_view>

namespace flashjit::cli {

// Creates or truncates path for writing. "" with fd set, or why it cannot be opened (without
// the path).
std::string open_output_file(const std::string& path, cache::Fd& fd);

// Writes all of bytes to fd and closes it. "" or the system's reason.
std::string write_and_close(cache::Fd& fd, std::string_view bytes);

}  // namespace flashjit::cli
