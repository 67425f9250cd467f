"""Shared by make_torch_file.py and check_torch_file.py (Debian's /usr/bin/python3 with
python3-torch 1.13): stand-ins for Megatron's enum classes under Megatron's module names,
so that torch.save / torch.load see the same globals as with Megatron installed, and a
walk of a state dict into {path: leaf}."""
import enum
import sys
import types


def _module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        n = ".".join(parts[:i])
        if n not in sys.modules:
            sys.modules[n] = types.ModuleType(n)
    return sys.modules[name]


def _enum(module, name, members, base=enum.Enum):
    cls = base(name, members, module=module)
    setattr(_module(module), name, cls)
    return cls


ModelType = _enum("megatron.core.enums", "ModelType", {"encoder_or_decoder": 1, "retro_encoder": 2})
AttnBackend = _enum("megatron.core.transformer.enums", "AttnBackend",
                    {"flash": 1, "fused": 2, "unfused": 3, "local": 4, "auto": 5})


class _StrEnum(str, enum.Enum):
    pass


RerunMode = _StrEnum("RerunMode", {"disabled": "disabled", "validate_results": "validate_results"},
                     module="megatron.core.rerun_state_machine")
setattr(_module("megatron.core.rerun_state_machine"), "RerunMode", RerunMode)


def walk(obj, prefix=""):
    """Yields (path, leaf) for every tensor and scalar below obj; dict keys and list
    indices joined by '/', attributes of argparse.Namespace under their names."""
    import argparse
    import torch
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, f"{prefix}{k}/")
    elif isinstance(obj, argparse.Namespace):
        for k, v in vars(obj).items():
            yield from walk(v, f"{prefix}{k}/")
    elif isinstance(obj, (list, tuple)) and not (obj and all(isinstance(x, (int, float)) for x in obj)):
        for i, v in enumerate(obj):
            yield from walk(v, f"{prefix}{i}/")
    else:
        yield prefix.rstrip("/"), obj
