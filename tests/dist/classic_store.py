# A PyTorch built without libuv (Debian's 2.x) still asks for libuv's TCPStore server by default, in
# torchrun's own store and in its processes' rendezvous, and fails. There TCPStore is replaced by
# one made with the classic server, the only one such a build has.
import sys
from datetime import timedelta

import torch.distributed as dist


def use_classic_store_without_libuv():
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10), use_libuv=True)
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
        libuv_store = dist.TCPStore

        class ClassicTCPStore(libuv_store):
            def __init__(self, *args, **kwargs):
                kwargs["use_libuv"] = False
                super().__init__(*args, **kwargs)

        # The rendezvous module's own name (torch.distributed.rendezvous is also a function's).
        dist.TCPStore = sys.modules["torch.distributed.rendezvous"].TCPStore = ClassicTCPStore
    except TypeError:
        pass  # no use_libuv at all (1.x): the classic server is all there is
