# torchrun (torch.distributed.run) with the arguments given. A PyTorch built without libuv (Debian's
# 2.x) asks for it in torchrun's own store and fails before starting any process; there torchrun's
# store is made with the classic TCPStore server, the only one such a build has.
import runpy
from datetime import timedelta

import torch.distributed as dist

try:
    dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10), use_libuv=True)
except RuntimeError as e:
    if "libuv" not in str(e):
        raise
    LibuvStore = dist.TCPStore

    class ClassicTCPStore(LibuvStore):
        def __init__(self, *args, **kwargs):
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)

    dist.TCPStore = ClassicTCPStore
except TypeError:
    pass  # no use_libuv at all (1.x): the classic server is all there is

runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
