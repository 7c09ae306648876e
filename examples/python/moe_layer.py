"""A complete moekit.MoeLayer example: DeepSeek-V3-style routing, checkpoint-like FP8 weights.

Run on an sm_90 GPU with torch and moekit installed:  python examples/python/moe_layer.py
Prints y's relative L2 error against a float32 torch computation of the same dequantized layer
(x unquantized: expect ~6e-2, the FP8 format itself; docs/accuracy.md).
"""
import torch

import moekit

E, K, H, I, T = 64, 8, 1024, 512, 256  # experts, top-k, hidden, intermediate, tokens
N_GROUP, TOPK_GROUP, SCALE = 8, 4, 2.5
dev = "cuda"
torch.manual_seed(0)

# Checkpoint-like weights: bf16 N(0, 0.02²), quantized 128x128 per expert by moekit itself.
w1, w1_scale = moekit.per_block_quant_fp8((torch.randn(E, 2 * I, H, device=dev) * 0.02).to(torch.bfloat16))
w2, w2_scale = moekit.per_block_quant_fp8((torch.randn(E, H, I, device=dev) * 0.02).to(torch.bfloat16))
bias = torch.rand(E, device=dev) * 0.1  # DeepSeek's e_score_correction_bias

layer = moekit.MoeLayer(
    E, K, H, I,
    routing=moekit.Routing("sigmoid_grouped", renormalize=True, num_groups=N_GROUP, topk_groups=TOPK_GROUP,
                           routed_scaling_factor=SCALE, correction_bias=bias),
)
layer.load_weights(w1, w1_scale, w2, w2_scale)

x = torch.randn(T, H, device=dev).to(torch.bfloat16)
router_logits = torch.randn(T, E, device=dev)
y = layer(x, router_logits=router_logits)  # bf16 [T, H], on the current stream


# The same layer in float32 torch: dequantized weights, moekit's routing (moekit.route is the
# kernel the layer runs), unquantized x and h.
def dequant(q, s):
    n, k = q.shape[-2:]
    full = s.repeat_interleave(128, dim=-2).repeat_interleave(128, dim=-1)[..., :n, :k]
    return q.float() * full


ids, weights = moekit.route(router_logits, layer.routing, K)
w1f, w2f = dequant(w1, w1_scale), dequant(w2, w2_scale)
ref = torch.zeros(T, H, device=dev)
for e in range(E):
    tok, slot = torch.where(ids == e)
    if tok.numel():
        gu = x[tok].float() @ w1f[e].T
        h = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]
        ref.index_add_(0, tok, weights[tok, slot, None] * (h @ w2f[e].T))

err = ((y.float() - ref).norm() / ref.norm()).item()
print(f"moekit {moekit.__version__}: y {tuple(y.shape)} {y.dtype}; relative L2 vs float32 torch layer: {err:.3e}")
assert err < 8e-2, "unexpectedly large error"
