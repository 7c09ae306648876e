"""moekit._ep (built with NCCL) without a GPU: it imports next to moekit._C, reports the NCCL it
loaded, makes NCCL unique ids, and rejects a malformed id or rank before any collective."""
import pytest

_ep = pytest.importorskip("moekit._ep", reason="moekit built without NCCL")


def test_reports_the_loaded_nccl():
    v = _ep.nccl_version()
    assert v >= 22800, v  # 2.28 or newer (the versions this was built and run with)


def test_unique_ids_are_fresh_128_byte_blobs():
    a, b = _ep.nccl_unique_id(), _ep.nccl_unique_id()
    assert isinstance(a, bytes) and len(a) == 128 and len(b) == 128
    assert a != b


def test_comm_rejects_a_bad_id_or_rank_before_any_collective():
    with pytest.raises(ValueError, match="128 bytes"):
        _ep.Comm(b"short", 2, 0)
    uid = _ep.nccl_unique_id()
    for world, rank in ((2, 2), (2, -1), (0, 0)):
        with pytest.raises(ValueError, match="rank"):
            _ep.Comm(uid, world, rank)
