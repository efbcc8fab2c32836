#pragma once
// loom::optim: SGD, Adam/AdamW, the Noam schedule, gradient clipping.
#include "loom/optim/optimizer.h"
