#include "cli/context.hpp"

#include "runtime/artifact.hpp"

namespace flashjit::cli {

cache::DiskStore& Context::cache() const { return store ? *store : default_store(); }

}  // namespace flashjit::cli
