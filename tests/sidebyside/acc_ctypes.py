"""The C API through ctypes, for the side-by-side run with Python Accelerate (side_by_side.py).

Only what that run calls: each wrapper raises with acc_last_error_message on a status other than
ACC_OK, and tensors cross as torch tensors copied to and from host memory.
"""
import ctypes
import os

import torch

ACC_OPTIONS_OPTIMIZER, ACC_OPTIONS_SCHEDULER, ACC_OPTIONS_DATALOADER, ACC_OPTIONS_ACCELERATOR = 1, 2, 3, 4
ACC_OPTIONS_LORA, ACC_OPTIONS_AVERAGED_MODEL, ACC_OPTIONS_TRAINABLE_TOKENS = 5, 7, 8
DTYPES = {torch.float32: 1, torch.float64: 2, torch.bfloat16: 3, torch.float16: 4, torch.int64: 5, torch.int32: 6}
REDUCTION_MEAN = 1

_p = ctypes.c_void_p
# acc_lr_lambda_fn: (user_data, step, *factor) -> non-zero on failure
LR_LAMBDA = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_int64, ctypes.POINTER(ctypes.c_double))
# acc_lr_group_lambda_fn: (user_data, group, step, *factor) -> non-zero on failure
GROUP_LR_LAMBDA = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_size_t, ctypes.c_int64, ctypes.POINTER(ctypes.c_double))


# acc_next_fn: (user_data, acc_tensor_list **out); acc_start_fn: (user_data, epoch)
NEXT_FN = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.POINTER(_p))
START_FN = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_int64)
# acc_sample_fn: (user_data, index, acc_tensor_list **out)
SAMPLE_FN = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.c_int64, ctypes.POINTER(_p))


class Error(RuntimeError):
    pass


class Library:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.lib.acc_last_error_message.restype = ctypes.c_char_p
        self.lib.acc_tensor_free.argtypes = [_p]

    def __getattr__(self, name):
        function = getattr(self.lib, name)

        def call(*args):
            status = function(*args)
            if status != 0:
                raise Error(f"{name}: {self.lib.acc_last_error_message().decode()}")
        return call

    # Handles -----------------------------------------------------------------------------------

    def options(self, kind, values):
        handle = _p()
        self.acc_options_create(kind, ctypes.byref(handle))
        for key, value in values.items():
            if isinstance(value, bool):
                self.acc_options_set_bool(handle, key.encode(), ctypes.c_int(int(value)))
            elif isinstance(value, int):
                self.acc_options_set_int(handle, key.encode(), ctypes.c_int64(value))
            elif isinstance(value, float):
                self.acc_options_set_double(handle, key.encode(), ctypes.c_double(value))
            else:
                self.acc_options_set_string(handle, key.encode(), str(value).encode())
        return handle

    def new(self, function, *args):
        handle = _p()
        getattr(self, function)(*args, ctypes.byref(handle))
        return handle

    # Tensors -----------------------------------------------------------------------------------

    def tensor(self, t):
        t = t.detach().contiguous().cpu()
        dims = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
        nbytes = t.numel() * t.element_size()
        return self.new("acc_tensor_from_host", _p(t.data_ptr()), ctypes.c_size_t(nbytes), dims,
                        ctypes.c_size_t(t.dim()), DTYPES[t.dtype])

    def to_torch(self, handle, dtype=torch.float32):
        """A float32 copy of the tensor (converted on our side first)."""
        converted = self.new("acc_tensor_to", handle, b"cpu", DTYPES[dtype])
        try:
            ndim = ctypes.c_size_t()
            self.acc_tensor_ndim(converted, ctypes.byref(ndim))
            dims = (ctypes.c_int64 * max(ndim.value, 1))()
            self.acc_tensor_shape(converted, dims, ctypes.c_size_t(ndim.value), ctypes.byref(ctypes.c_size_t()))
            out = torch.empty([dims[i] for i in range(ndim.value)], dtype=dtype)
            self.acc_tensor_to_host(converted, _p(out.data_ptr()), ctypes.c_size_t(out.numel() * out.element_size()))
            return out
        finally:
            self.lib.acc_tensor_free(converted)

    def item(self, handle):
        value = ctypes.c_double()
        self.acc_tensor_item(handle, ctypes.byref(value))
        return value.value

    def list_get(self, lst, index):
        t = _p()
        self.acc_tensor_list_get(lst, ctypes.c_size_t(index), ctypes.byref(t))
        return t

    def list_items(self, lst):
        size = ctypes.c_size_t()
        self.acc_tensor_list_size(lst, ctypes.byref(size))
        items = []
        for i in range(size.value):
            name = ctypes.c_char_p()
            self.acc_tensor_list_name(lst, ctypes.c_size_t(i), ctypes.byref(name))
            items.append((name.value.decode(), self.list_get(lst, i)))
        return items


def load(build_dir):
    for name in ("libaccelerate.so", "capi/libaccelerate.so", "lib/libaccelerate.so"):
        path = os.path.join(build_dir, name)
        if os.path.exists(path):
            return Library(path)
    raise FileNotFoundError(f"no libaccelerate.so under {build_dir}")
