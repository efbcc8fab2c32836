#pragma once
// loom::dist: the communicator seam (self, MPI), the world-size-independent sums and
// the gradient reducer that overlaps them with backward.
#include "loom/dist/communicator.h"
#include "loom/dist/gradient_reducer.h"
#include "loom/dist/tree_sum.h"
