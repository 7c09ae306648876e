// What the expert-parallel layer (src/ep) takes from the MoeLayer of its local experts: the
// prepared weights as a forward request and the plan of a forward over pre-quantized tokens, so
// the dispatched rows run through the same kernels, with the same choices, as a MoeLayer forward.
#pragma once
#include <cstdint>

#include "moe/moe_forward.h"
#include "moekit/moe_layer.h"
#include "planning/moe_plan.h"

namespace moekit::detail {

struct MoeLayerAccess {
  /// A forward request holding the layer's prepared weights (and biases); buffers left unset.
  /// Throws kInvalidArgument when the weights are not prepared.
  static MoeForwardRequest weights(const MoeLayer& layer, const char* fn);
  /// The plan of a forward over `num_tokens` caller-quantized tokens with caller ids (t > 0).
  static MoePlan prequantized_plan(const MoeLayer& layer, int64_t num_tokens);
};

}  // namespace moekit::detail
