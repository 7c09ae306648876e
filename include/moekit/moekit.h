// moekit — umbrella header.
#pragma once
#include "moekit/attention.h"
#include "moekit/error.h"
#include "moekit/gemm.h"
#include "moekit/numerics.h"
#include "moekit/mxfp4.h"
#include "moekit/quantize.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_ops.h"
#include "moekit/moe_layer.h"
#include "moekit/moe_permute.h"
#include "moekit/moe_sort.h"
#include "moekit/routing.h"
