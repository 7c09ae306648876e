// moekit._C — what the binding files share.
#pragma once
#include <nanobind/nanobind.h>

#include <cstdint>

#include "moekit/routing.h"
#include "tensor.h"

namespace moekit::py {

void bind_layer(nb::module_& m);  // bind_layer.cpp: Routing, Layer
void bind_ops(nb::module_& m);    // bind_ops.cpp: GEMMs, quantizers, route, prepare_*
void bind_bench_data(nb::module_& m);  // bind_bench_data.cpp: the benches' data generators
void bind_attention(nb::module_& m);   // bind_attention.cpp: DeepSeek-V4 sparse attention, its cache, RoPE

/// bind_layer.cpp: the RoutingConfig of a Python Routing for E experts and k slots (TypeError if
/// `routing` is not one; ValueError if its bias has ≠ E entries or sits on another device).
RoutingConfig routing_config(nb::handle routing, int64_t num_experts, int64_t top_k, const DeviceScope& devices);

}  // namespace moekit::py
