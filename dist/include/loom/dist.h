#pragma once
// loom::dist: the communicator seam (self, MPI) and the world-size-independent sums.
#include "loom/dist/communicator.h"
#include "loom/dist/tree_sum.h"
