"""Rewrites an adapter folder's weights as PEFT's older saves wrote them: torch.save of the state dict
in adapter_model.bin, read by hand from adapter_model.safetensors (Debian packages no Python
safetensors). Usage: pickle_adapter.py FOLDER"""
import json
import struct
import sys

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}

folder = sys.argv[1]
with open(folder + "/adapter_model.safetensors", "rb") as f:
    data = f.read()
length = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + length])
body = data[8 + length:]
state = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    begin, end = info["data_offsets"]
    dtype = DTYPES[info["dtype"]]
    flat = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
    state[name] = flat.reshape(info["shape"]).clone()
torch.save(state, folder + "/adapter_model.bin")
