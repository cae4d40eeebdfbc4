// Forces a pool larger than the 2-core CI machines (and of odd size) so that the partitioning code
// paths are exercised. Runs during static initialisation, before the pool is first created.
#include <cstdlib>

namespace {
const bool kPoolSizeSet = [] {
  setenv("DEEPINFER_NUM_THREADS", "5", /*overwrite=*/0);
  return true;
}();
}  // namespace
