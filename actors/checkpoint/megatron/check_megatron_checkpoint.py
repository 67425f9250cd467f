#!/usr/bin/python3
"""check_megatron_checkpoint.py DIR key=value...: torch.load (Debian's PyTorch 1.13) every
rank file of the legacy checkpoint in DIR (tracker -> iter dir), check each holds exactly
the keys, in order, with the shard shapes that megatron_layout.py says Megatron writes for
the config, the Megatron top-level entries and args, then merge the shards back into
logical tensors (model from fp32_from_fp16_params when bf16, Adam moments by parameter
order) and write them to DIR/merged/*.bin with DIR/merged.json. Exit 1 with a message on
any difference."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_layout as ml  # noqa: E402

d = sys.argv[1]
c = ml.Config.parse(sys.argv[2:])
it = open(os.path.join(d, "latest_checkpointed_iteration.txt")).read().strip()
it_dir = os.path.join(d, f"iter_{int(it):07d}")


def fail(msg):
    print("check_megatron_checkpoint: " + msg)
    sys.exit(1)


expected_dirs = sorted(ml.rank_dir(t, p, e, c) for t in range(c.tp) for p in range(c.pp) for e in range(c.ep))
if sorted(os.listdir(it_dir)) != expected_dirs:
    fail(f"rank dirs {sorted(os.listdir(it_dir))}, expected {expected_dirs}")
pieces = {}
for p in range(c.pp):
    for e in range(c.ep):
        for t in range(c.tp):
            path = os.path.join(it_dir, ml.rank_dir(t, p, e, c), "model_optim_rng.pt")
            sd = torch.load(path, map_location="cpu")
            for k in ("args", "checkpoint_version", "iteration", "model", "optimizer", "opt_param_scheduler",
                      "num_floating_point_operations_so_far"):
                if k not in sd:
                    fail(f"{path}: no '{k}'")
            if sd["checkpoint_version"] != 3.0 or sd["iteration"] != int(it):
                fail(f"{path}: checkpoint_version {sd['checkpoint_version']} iteration {sd['iteration']}")
            a = sd["args"]
            if (a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.expert_model_parallel_size) != (c.tp, c.pp, c.ep):
                fail(f"{path}: args layout {a.tensor_model_parallel_size} {a.pipeline_model_parallel_size} {a.expert_model_parallel_size}")
            entries = ml.rank_entries(c, p, e)
            keys = list(sd["model"].keys())
            if keys != [k for k, _, _ in entries]:
                fail(f"{path}: keys\n{keys}\nexpected\n{[k for k, _, _ in entries]}")
            params = []
            for k, n, kind in entries:
                v = sd["model"][k]
                if n is None:
                    if v is not None and not isinstance(v, torch.Tensor):
                        fail(f"{path}: {k} is {type(v)}")
                    continue
                want = torch.float32 if (kind == "buffers/" or not c.bf16) else torch.bfloat16
                if v.dtype != want:
                    fail(f"{path}: {k} has dtype {v.dtype}, expected {want}")
                kd = ml.split_kind(n, c)
                is_copy = k == "output_layer.weight" and c.tied
                if kind == "model/":
                    params.append((n, ".mlp.experts." in n, n.endswith(".bias") or v.dim() == 1, kd, is_copy))
                if not is_copy:
                    pieces.setdefault(kind + n, {})[t] = (v.float(), kd)
            opts = sd["optimizer"] if isinstance(sd["optimizer"], list) else [sd["optimizer"]]
            for oi, o in enumerate(opts):
                inner = o["optimizer"] if c.bf16 else o
                groups = inner["param_groups"]
                pool = {nd: [x for x in params if x[1] == (oi == 1) and x[2] == nd] for nd in (False, True)}
                for g, group in enumerate(groups):
                    nd = group["wd_mult"] == 0.0
                    if len(group["params"]) != len(pool[nd]):
                        fail(f"{path}: optimizer {oi} group {g} has {len(group['params'])} params, model {len(pool[nd])}")
                    for i, (pid, (n, _, _, kd, is_copy)) in enumerate(zip(group["params"], pool[nd])):
                        st = inner["state"][pid]
                        if c.bf16:
                            m = o["fp32_from_fp16_params"][g][i]
                            if m.dtype != torch.float32:
                                fail(f"{path}: master of {n} is {m.dtype}")
                            if not is_copy:
                                pieces.setdefault("master/" + n, {})[t] = (m, kd)
                        if not is_copy:
                            pieces.setdefault("optimizer/exp_avg/" + n, {})[t] = (st["exp_avg"], kd)
                            pieces.setdefault("optimizer/exp_avg_sq/" + n, {})[t] = (st["exp_avg_sq"], kd)
merged = {}
for name, by_rank in pieces.items():
    kd = next(iter(by_rank.values()))[1]
    if kd == "none":
        merged[name] = by_rank[0][0]
    else:
        merged[name] = ml.merge([by_rank[t][0] for t in range(c.tp)], kd)
if c.bf16:
    for name in list(merged):
        if name.startswith("master/"):
            merged["model/" + name[7:]] = merged.pop(name)
os.makedirs(os.path.join(d, "merged"), exist_ok=True)
index = {}
for k, (name, tensor) in enumerate(sorted(merged.items())):
    fn = f"merged/{k}.bin"
    tensor.contiguous().numpy().tofile(os.path.join(d, fn))
    index[name] = {"shape": list(tensor.shape), "file": fn}
json.dump(index, open(os.path.join(d, "merged.json"), "w"), indent=1)
print("ok", len(index))
