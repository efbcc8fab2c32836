#pragma once
// loom::nn: Module and the Transformer's layers.
#include "loom/nn/attention.h"
#include "loom/nn/checkpoint.h"
#include "loom/nn/init.h"
#include "loom/nn/layers.h"
#include "loom/nn/module.h"
