// The public header of an installed flashjit: #include <flashjit/flashjit.hpp>.
#pragma once
#include "runtime/flashjit.hpp"
