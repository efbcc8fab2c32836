#include <doctest/doctest.h>
#include "loom/ops.h"
