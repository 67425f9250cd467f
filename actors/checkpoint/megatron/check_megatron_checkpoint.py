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


def check_distributed_optimizer(path, sd, c, p, t, entries, params):
    """--use-distributed-optimizer (dense models, one model chunk): 'optimizer' is
    DistributedOptimizer.state_dict() (param groups without 'params', with 'step'; no
    per-parameter state) and distrib_optim.pt beside it holds {'buckets_coalesced': True,
    0: {(param dtype, torch.float32): {'param', 'exp_avg', 'exp_avg_sq', 'numel_unpadded'}}},
    laid out as megatron_layout.distopt_world_tensors (the transcription of Megatron-Core's
    layout) says; each parameter's slices go to `pieces` as the other optimizers' do."""
    o = sd["optimizer"]
    if not isinstance(o, dict) or list(o.keys()) != ["optimizer"] or list(o["optimizer"].keys()) != ["param_groups"]:
        fail(f"{path}: a distributed optimizer's state_dict is {{'optimizer': {{'param_groups': ...}}}}, got {o!r:.200}")
    for g in o["optimizer"]["param_groups"]:
        if "params" in g or not isinstance(g.get("step"), int):
            fail(f"{path}: param group {g!r:.200} (no 'params', an int 'step')")
    dist_path = os.path.join(os.path.dirname(path), "distrib_optim.pt")
    dist = torch.load(dist_path, map_location="cpu")
    if list(dist.keys()) != ["buckets_coalesced", 0] or dist["buckets_coalesced"] is not True:
        fail(f"{dist_path}: top-level keys {list(dist.keys())}")
    (dtype_key, world), = dist[0].items()
    if dtype_key != (torch.bfloat16 if c.bf16 else torch.float32, torch.float32):
        fail(f"{dist_path}: buffer key {dtype_key}")
    model_entries = [(k, n) for k, n, kind in entries if kind == "model/"]
    shared, bucket_size = ml.distopt_shared_and_bucket(c, p, entries)
    # Where each parameter lands: lay out position markers 1, 2, ... with the same code.
    sizes = [sd["model"][k].numel() for k, _ in model_entries]
    markers, base = [], 1
    for n in sizes:
        markers.append(torch.arange(base, base + n, dtype=torch.float64))
        base += n
    positions, numel = ml.distopt_world_tensors(markers, shared, bucket_size, c.dp, c.busbw)
    if world["numel_unpadded"] != numel:
        fail(f"{dist_path}: numel_unpadded {world['numel_unpadded']}, the layout gives {numel}")
    for key in ("param", "exp_avg", "exp_avg_sq"):
        if world[key].dtype != torch.float32 or tuple(world[key].shape) != (numel,):
            fail(f"{dist_path}: {key} is {world[key].dtype} {tuple(world[key].shape)}, expected float32 ({numel},)")
    start = 1
    for (k, _), n, (name, _, _, kd, is_copy) in zip(model_entries, sizes, params):
        off = int((positions == start).nonzero()[0])
        start += n
        shape = sd["model"][k].shape
        sl = {key: world[key][off:off + n].reshape(shape) for key in ("param", "exp_avg", "exp_avg_sq")}
        if not c.bf16 and not torch.equal(sl["param"], sd["model"][k]):
            fail(f"{dist_path}: 'param' of {k} differs from the model's weight")
        if is_copy:
            continue
        if c.bf16:
            pieces.setdefault("master/" + name, {})[t] = (sl["param"], kd)
        pieces.setdefault("optimizer/exp_avg/" + name, {})[t] = (sl["exp_avg"], kd)
        pieces.setdefault("optimizer/exp_avg_sq/" + name, {})[t] = (sl["exp_avg_sq"], kd)


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
            if c.distopt:
                check_distributed_optimizer(path, sd, c, p, t, entries, params)
                continue
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
