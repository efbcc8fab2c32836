#pragma once
// loom::models: the Transformer, its presets, training and decoding.
#include "loom/models/attention_maps.h"
#include "loom/models/bleu.h"
#include "loom/models/data.h"
#include "loom/models/decode.h"
#include "loom/models/run_folder.h"
#include "loom/models/trainer.h"
#include "loom/models/transformer.h"
