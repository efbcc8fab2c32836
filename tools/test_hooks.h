#pragma once
// What the tests set through the environment to reach states a real run reaches
// rarely (tests/cli_train.sh); nothing happens unless the variable is set.
#include "loom/models/trainer.h"

namespace loom::tools {

// LOOM_TEST_POISON_STEP=N (tests only): after update N a parameter becomes NaN,
// the way a diverging run ends, to check that nothing good is overwritten.
void poison_for_tests(models::TrainerHooks& hooks, models::Trainer& trainer);

}  // namespace loom::tools
