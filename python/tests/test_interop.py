"""Memory shared with NumPy and PyTorch, never copied: the same data pointer both ways."""
import numpy as np
import pytest
import torch
import torch.utils.dlpack

import loom


def address(array):
    return array.__array_interface__["data"][0]


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = loom.from_numpy(a)
    assert t.data_ptr() == address(a)
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    view = loom.from_numpy(a[:, 1::2])  # strided: no copy either
    assert view.shape == (3, 2) and view.stride() == (4, 2)
    assert view.data_ptr() == address(a) + 8
    np.testing.assert_array_equal(view.numpy(), a[:, 1::2])


def test_numpy_of_a_tensor_shares_memory_and_keeps_it_alive():
    t = loom.ones([2, 3], dtype=loom.float32)
    a = t.numpy()
    assert address(a) == t.data_ptr()
    a[1, 2] = 7.0
    assert t.sum().item() == 12.0
    del t  # the array holds the storage
    assert a.sum() == 12.0
    with pytest.raises(loom.Error, match="requires grad; use .detach"):
        loom.ones([2]).requires_grad_().numpy()


def test_buffer_protocol():
    t = loom.tensor([[1, 2], [3, 4]], dtype=loom.int32)
    m = memoryview(t)
    assert m.format == "i" and m.shape == (2, 2) and m.strides == (8, 4)
    b = np.asarray(m)
    assert address(b) == t.data_ptr()
    np.testing.assert_array_equal(np.array(t), [[1, 2], [3, 4]])


def test_dlpack_loom_torch_loom_without_copies():
    t = loom.tensor(np.linspace(0, 1, 6).reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)
    pt = torch.utils.dlpack.from_dlpack(t)
    assert pt.data_ptr() == t.data_ptr() and pt.dtype == torch.float64 and tuple(pt.shape) == (2, 3)
    back = loom.from_dlpack(pt)
    assert back.data_ptr() == t.data_ptr()
    pt[1, 2] = -5.0
    assert t[1, 2].item() == -5.0 and back[1, 2].item() == -5.0
    # torch -> loom, a non-contiguous view, alive after torch lets go
    source = torch.arange(20, dtype=torch.int64).reshape(4, 5)[:, 1:4]
    shared = loom.from_dlpack(torch.utils.dlpack.to_dlpack(source))
    assert shared.data_ptr() == source.data_ptr() and shared.stride() == (5, 1)
    del source
    assert shared.tolist() == [[1, 2, 3], [6, 7, 8], [11, 12, 13], [16, 17, 18]]


def test_dtypes_without_a_counterpart_are_named():
    with pytest.raises(TypeError, match="complex128"):
        loom.from_numpy(np.zeros(2, dtype=np.complex128))
    with pytest.raises(ValueError, match="negative"):
        loom.from_numpy(np.arange(4.0)[::-1])
