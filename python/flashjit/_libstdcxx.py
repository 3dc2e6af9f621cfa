"""Puts the C++ runtime (libstdc++) in the process's global symbol scope before flashjit._core loads.

flashjit._core, like every C++ extension, carries its own copies of inline parts of libstdc++
(std::string, std::regex, locale facets). Which copy libstdc++ itself then uses depends on who
loaded libstdc++ first: flashjit._core (libstdc++ binds to the extension's copies) or numpy or
torch (libstdc++ binds to its own, the extension to its copies). The mixed case crashed in
locale code (std::regex in flashjit, number formatting in torch) on Ubuntu 24.04 with the
extension built by g++ 13. With libstdc++ global first, every module binds to libstdc++'s own
definitions. The extension now exports PyInit__core alone (python/src/exports.map), which takes
its copies out of every other module's reach as well; the preload stays until the machine where
the crash was seen has run without it.
"""

from __future__ import annotations

import ctypes
import sys


def load_global() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # a statically linked runtime or another C++ library: nothing to share


load_global()
