"""moekit's Python layer without a GPU: configuration and argument validation on CPU tensors,
the op registrations and their fakes, and the pure-torch layout helpers."""
import pytest

moekit = pytest.importorskip("moekit")


def test_routing_validation():
    assert moekit.Routing("sigmoid_grouped", num_groups=8, topk_groups=4).topk_groups == 4
    with pytest.raises(ValueError, match="method"):
        moekit.Routing("softmax")
    with pytest.raises(ValueError, match="topk_groups"):
        moekit.Routing("sigmoid_grouped", num_groups=2, topk_groups=3)
    with pytest.raises(ValueError, match="num_groups"):
        moekit.Routing("sigmoid_grouped", num_groups=0)
    assert moekit.Routing.coerce({"method": "topk_softmax"}) == moekit.Routing("topk_softmax")
    assert moekit.Routing.coerce("softmax_topk") == moekit.Routing()
    with pytest.raises(TypeError):
        moekit.Routing.coerce(3)


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        moekit.not_a_function  # noqa: B018


torch = pytest.importorskip("torch")
FP8 = torch.float8_e4m3fn


def _weights(e, h, i, device="cpu"):
    kb = lambda n: (n + 127) // 128  # noqa: E731
    return (
        torch.zeros((e, 2 * i, h), dtype=FP8, device=device),
        torch.ones((e, kb(2 * i), kb(h)), device=device),
        torch.zeros((e, h, i), dtype=FP8, device=device),
        torch.ones((e, kb(h), kb(i)), device=device),
    )


def test_layer_config_errors_need_no_gpu():
    with pytest.raises(ValueError):
        moekit.MoeLayer(8, 2, 100, 128)  # H not a multiple of 16 (moekit's validation)
    with pytest.raises(ValueError):
        moekit.MoeLayer(8, 9, 128, 128)  # k > E
    with pytest.raises(ValueError, match="gemm1_input"):
        moekit.MoeLayer(8, 2, 128, 128, gemm1_input="fast")
    with pytest.raises(ValueError, match="expert_parallel"):
        moekit.MoeLayer(8, 2, 128, 128, expert_parallel=4)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.MoeLayer(8, 2, 128, 128, routing=moekit.Routing("sigmoid_grouped", correction_bias=torch.zeros(8)))
    with pytest.raises(ValueError, match="correction_bias"):
        moekit.MoeLayer(8, 2, 128, 128, routing=moekit.Routing("sigmoid_grouped", correction_bias=torch.zeros(4)))


def test_layer_is_a_module_without_parameters():
    layer = moekit.MoeLayer(8, 2, 256, 128, routing="softmax_topk", expert_parallel=(4, 4))
    assert isinstance(layer, torch.nn.Module)
    assert list(layer.parameters()) == [] and layer.state_dict() == {}
    assert layer.local_count == 4 and layer.device is None
    assert layer.prepared_weight_bytes() > 0
    assert "E=8" in repr(layer)


def test_load_weights_validation_on_cpu():
    e, h, i = 4, 256, 128
    layer = moekit.MoeLayer(e, 2, h, i)
    w1, s1, w2, s2 = _weights(e, h, i)
    with pytest.raises(ValueError, match="CUDA"):
        layer.load_weights(w1, s1, w2, s2)  # everything right but the device
    with pytest.raises(TypeError, match="w1"):
        layer.load_weights(w1.float(), s1, w2, s2)
    with pytest.raises(TypeError, match="w2_scale"):
        layer.load_weights(w1, s1, w2, s2.double())
    with pytest.raises(ValueError, match=r"w2.*\[E_local, H, I\]"):
        layer.load_weights(w1, s1, w2[:, :, :64], s2)
    with pytest.raises(ValueError, match="w1_scale"):
        layer.load_weights(w1, s1[:3], w2, s2)
    with pytest.raises(ValueError, match="contiguous"):
        layer.load_weights(w1, s1, w2.transpose(1, 2).contiguous().transpose(1, 2), s2)
    assert not layer.weights_loaded
    x = torch.zeros((2, h), dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="load_weights"):
        layer(x, topk_ids=torch.zeros((2, 2), dtype=torch.int32), topk_weights=torch.ones(2, 2))


def test_mxfp4_weights_validation_on_cpu():
    e, h, i = 4, 256, 128
    with pytest.raises(ValueError, match="weight_format"):
        moekit.MoeLayer(e, 2, h, i, weight_format="nvfp4")
    layer = moekit.MoeLayer(e, 2, h, i, weight_format="mxfp4")
    assert layer.weight_format == "mxfp4" and "mxfp4" in repr(layer)
    u8 = lambda *s: torch.zeros(s, dtype=torch.uint8)  # noqa: E731
    w1, s1, w2, s2 = u8(e, 2 * i, h // 2), u8(e, 2 * i, h // 32), u8(e, h, i // 2), u8(e, h, i // 32)
    with pytest.raises(ValueError, match="CUDA"):
        layer.load_mxfp4_weights(w1, s1, w2, s2)  # everything right but the device
    with pytest.raises(ValueError, match="CUDA"):
        layer.load_mxfp4_weights(w1.reshape(e, 2 * i, h // 32, 16), s1, w2, s2)  # gpt-oss's blocks shape
    with pytest.raises(ValueError, match=r"w1.*\[E_local, 2I, H/2\]"):
        layer.load_mxfp4_weights(u8(e, 2 * i, h), s1, w2, s2)
    with pytest.raises(TypeError, match="w2_scale"):
        layer.load_mxfp4_weights(w1, s1, w2, s2.float())
    with pytest.raises(ValueError, match="load_mxfp4_weights"):
        layer.load_weights(*_weights(e, h, i))
    with pytest.raises(ValueError, match="load_weights"):
        moekit.MoeLayer(e, 2, h, i).load_mxfp4_weights(w1, s1, w2, s2)


def test_op_validation_on_cpu():
    a = torch.zeros((16, 256), dtype=FP8)
    sa = torch.ones((16, 2))
    b = torch.zeros((128, 256), dtype=FP8)
    sb = torch.ones((1, 2))
    out = torch.zeros((16, 128), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.fp8_gemm_nt((a, sa), (b, sb), out)
    with pytest.raises(TypeError, match="out"):
        moekit.fp8_gemm_nt((a, sa), (b, sb), out.float())
    with pytest.raises(TypeError, match="sfa"):
        moekit.fp8_gemm_nt((a, sa.double()), (b, sb), out)
    with pytest.raises(ValueError, match="sfb"):
        moekit.fp8_gemm_nt((a, sa), (b, torch.ones((2, 2))), out)
    with pytest.raises(ValueError, match="out"):
        moekit.fp8_gemm_nt((a, sa), (b, sb), out[:8])
    with pytest.raises(ValueError, match="multiple of 128"):
        moekit.m_grouped_fp8_gemm_nt_contiguous(
            (a, sa), (b[None], sb[None]), out, torch.zeros(16, dtype=torch.int32))
    with pytest.raises(TypeError, match="m_indices"):
        moekit.m_grouped_fp8_gemm_nt_contiguous(
            (a, sa), (b[None], sb[None]), out, torch.zeros(16, dtype=torch.int64))
    with pytest.raises(ValueError, match="group_size"):
        moekit.per_token_group_quant_fp8(torch.zeros((4, 256), dtype=torch.bfloat16), group_size=64)
    with pytest.raises(ValueError, match="CUDA"):
        moekit.per_token_group_quant_fp8(torch.zeros((4, 256), dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="w"):
        moekit.per_block_quant_fp8(torch.zeros((4, 256)))
    with pytest.raises(ValueError, match="CUDA"):
        moekit.route(torch.zeros((4, 8)), "softmax_topk", 2)
    with pytest.raises(ValueError, match="top_k"):
        moekit.route(torch.zeros((4, 8)), "softmax_topk", 0)


def test_sfa_to_physical_layout_on_cpu():
    m, k = 5, 300  # kb = 3, sfa_ld = 8
    logical = torch.arange(m * 3, dtype=torch.float32).view(m, 3)
    phys = moekit.sfa_to_physical(logical, m, k)
    assert phys.shape == (3, moekit.sfa_ld(m)) == (3, 8) and phys.is_contiguous()
    for row in range(m):
        for kb in range(3):
            assert phys.flatten()[kb * 8 + row] == logical[row, kb]
    view = phys[:, :m].t()  # already physical: used in place
    again = moekit.sfa_to_physical(view, m, k)
    assert again.data_ptr() == phys.data_ptr() and torch.equal(again[:, :m], phys[:, :m])
    exact = torch.empty_strided((m, 3), (1, 8))  # physical strides, storage too short for [3, 8]
    exact.copy_(logical)
    copied = moekit.sfa_to_physical(exact, m, k)
    assert copied.data_ptr() != exact.data_ptr() and torch.equal(copied[:, :m], phys[:, :m])


def test_expected_contiguous_layout_on_cpu():
    from moekit._ops import _expected_m_indices

    counts = torch.tensor([5, 0, 130, 17], dtype=torch.int32)
    seg = [(int(c) + 127) // 128 * 128 for c in counts]
    offsets = torch.tensor([0] + list(torch.tensor(seg).cumsum(0)), dtype=torch.int32)
    rows = int(offsets[-1]) + 128  # one trailing all-padding block
    want = [-1] * rows
    for grp, (c, o) in enumerate(zip(counts.tolist(), offsets.tolist())):
        want[o:o + c] = [grp] * c
    got = _expected_m_indices(counts, offsets, rows)
    assert got.tolist() == want


def test_registered_ops_and_fakes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    for name in ("moe_forward", "gemm_fp8_nt", "grouped_gemm_fp8_contiguous", "grouped_gemm_fp8_masked",
                 "contiguous_offsets", "quantize_act_1x128", "quantize_weight_128x128", "route"):
        assert hasattr(torch.ops.moekit, name), name
    with FakeTensorMode():
        x = torch.empty((37, 320), dtype=torch.bfloat16)
        q, sa = torch.ops.moekit.quantize_act_1x128(x, False)
        assert q.shape == (37, 320) and q.dtype == FP8 and sa.shape == (3, 40)
        qw, sb = torch.ops.moekit.quantize_weight_128x128(torch.empty((200, 320), dtype=torch.bfloat16), False)
        assert qw.shape == (200, 320) and sb.shape == (2, 3)
        ids, w = torch.ops.moekit.route(torch.empty((7, 16)), 4, "softmax_topk", True, 1, 1, 1.0, None)
        assert ids.shape == (7, 4) and ids.dtype == torch.int32 and w.dtype == torch.float32
        off = torch.ops.moekit.contiguous_offsets(torch.empty(5, dtype=torch.int32))
        assert off.shape == (6,) and off.dtype == torch.int32
