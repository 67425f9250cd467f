#!/usr/bin/python3
"""check_torch_file.py FILE: torch.load (Debian's PyTorch 1.13) of FILE; prints one JSON
object {"tensors": {path: {"shape", "dtype", "values" (as float64), "contiguous"}},
"scalars": {path: repr}} over every leaf (paths as torch_helpers.walk builds them)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_helpers as th  # noqa: E402

obj = torch.load(sys.argv[1], map_location="cpu")
tensors, scalars = {}, {}
for path, leaf in th.walk(obj):
    if isinstance(leaf, torch.Tensor):
        tensors[path] = {"shape": list(leaf.shape), "dtype": str(leaf.dtype).replace("torch.", ""),
                         "values": leaf.detach().to(torch.float64).flatten().tolist(),
                         "contiguous": leaf.is_contiguous()}
    else:
        scalars[path] = repr(leaf)
print(json.dumps({"tensors": tensors, "scalars": scalars, "type": type(obj).__name__}))
