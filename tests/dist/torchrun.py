# torchrun (torch.distributed.run) with the arguments given, able to start where PyTorch was built
# without libuv (classic_store.py).
import os
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from classic_store import use_classic_store_without_libuv  # noqa: E402

use_classic_store_without_libuv()
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
