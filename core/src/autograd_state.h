#pragma once
// Thread-local state autograd.cpp owns and backward_engine.cpp reads and sets.
#include <source_location>
#include <string>

#include "loom/autograd.h"

namespace loom::detail {
extern thread_local const Node* tls_backward_node;  // the node whose backward is running
extern thread_local int tls_backward_passes;        // backward passes running on this thread (in_backward())
extern thread_local GradientTrace* tls_trace;       // the gradient trace being recorded, or null
// "file:line (function)" for a node's call site in error messages.
std::string where_text(const std::source_location& loc);
// The front end's line the node was recorded at (anomaly mode), else where_text(node.where).
std::string node_site(const Node& node);
}  // namespace loom::detail
