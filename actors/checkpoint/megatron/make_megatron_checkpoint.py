#!/usr/bin/python3
"""make_megatron_checkpoint.py OUT key=value...: writes, with torch.save, a Megatron-Core
legacy checkpoint (iter_0000005/mp_rank_*/model_optim_rng.pt + tracker) of a small GPT
with random logical tensors, sharded as megatron_layout.py models Megatron (keys are
config fields: tp pp ep spec swiglu experts grouped tied bf16). Optimizer: Adam state per
parameter in the order of the model state dict, groups [weight decay, none]
(wd_mult 1 / 0), dense and expert optimizers in a list when there are experts; with bf16
the model tensors are bf16 and the fp32 masters are in fp32_from_fp16_params. The logical
tensors go to OUT/expected/*.bin (float32) listed in OUT/expected.json."""
import argparse
import collections
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_layout as ml  # noqa: E402

out = sys.argv[1]
c = ml.Config.parse(sys.argv[2:])
torch.manual_seed(11)
logical = collections.OrderedDict()
for name, shape in ml.logical_shapes(c):
    logical["model/" + name] = torch.randn(*shape)
    logical["optimizer/exp_avg/" + name] = torch.randn(*shape)
    logical["optimizer/exp_avg_sq/" + name] = torch.rand(*shape)
for name, shape in ml.buffers(c):
    logical["buffers/" + name] = torch.randn(*shape)

args = argparse.Namespace(num_layers=c.layers, hidden_size=c.hidden, num_attention_heads=c.heads,
                          ffn_hidden_size=c.ffn, tensor_model_parallel_size=c.tp,
                          pipeline_model_parallel_size=c.pp, expert_model_parallel_size=c.ep,
                          swiglu=bool(c.swiglu), num_experts=c.experts or None,
                          moe_grouped_gemm=bool(c.grouped), untie_embeddings_and_output_weights=not c.tied,
                          params_dtype=torch.bfloat16 if c.bf16 else torch.float32,
                          consumed_train_samples=40, consumed_valid_samples=8, lr=1e-3, min_lr=1e-4,
                          transformer_impl="transformer_engine" if c.spec == "te" else "local",
                          use_distributed_optimizer=bool(c.distopt), data_parallel_size=c.dp,
                          context_parallel_size=1, overlap_grad_reduce=c.bucket > 0,
                          ddp_bucket_size=c.bucket or None,
                          ddp_pad_buckets_for_high_nccl_busbw=bool(c.busbw))
it_dir = os.path.join(out, "iter_0000005")
for p in range(c.pp):
    for e in range(c.ep):
        for t in range(c.tp):
            model = collections.OrderedDict()
            params = []  # (logical, is_expert, no_decay, split, shard)
            entries = ml.rank_entries(c, p, e)
            for k, n, kind in entries:
                if n is None:
                    model[k] = None
                    continue
                full = logical[kind + n]
                kd = ml.split_kind(n, c)
                s = ml.shard(full, kd, t, c.tp).clone()
                if kind == "model/":
                    params.append((n, ".mlp.experts." in n, n.endswith(".bias") or s.dim() == 1, kd, s))
                    if c.bf16:
                        s = s.to(torch.bfloat16)
                model[k] = s
            opts = []
            for expert in ([False, True] if c.experts else [False]):
                state, groups, masters, i = {}, [], [], 0
                for nd in (False, True):
                    ids, gm = [], []
                    for n, ex, nodecay, kd, s in params:
                        if ex != expert or nodecay != nd:
                            continue
                        ids.append(i)
                        gm.append(s.clone())
                        state[i] = {"step": torch.tensor(5.0),
                                    "exp_avg": ml.shard(logical["optimizer/exp_avg/" + n], kd, t, c.tp).clone(),
                                    "exp_avg_sq": ml.shard(logical["optimizer/exp_avg_sq/" + n], kd, t, c.tp).clone()}
                        i += 1
                    groups.append({"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.0 if nd else 0.1,
                                   "wd_mult": 0.0 if nd else 1.0, "lr_mult": 1.0, "params": ids})
                    masters.append(gm)
                inner = {"state": state, "param_groups": groups}
                opts.append({"optimizer": inner, "fp32_from_fp16_params": masters} if c.bf16 else inner)
            d = os.path.join(it_dir, ml.rank_dir(t, p, e, c))
            os.makedirs(d, exist_ok=True)
            if c.distopt:
                # DistributedOptimizer.state_dict(): no per-parameter state, 'step' in each
                # group; the state goes to distrib_optim.pt (dense models: one buffer).
                assert not c.experts
                groups = [{k: v for k, v in g.items() if k != "params"} for g in
                          (opts[0]["optimizer"] if c.bf16 else opts[0])["param_groups"]]
                for g in groups:
                    g["step"] = 5
                opts = [{"optimizer": {"param_groups": groups}}]
                shared, bucket_size = ml.distopt_shared_and_bucket(c, p, entries)
                world = {}
                for key, src in (("param", None), ("exp_avg", "optimizer/exp_avg/"), ("exp_avg_sq", "optimizer/exp_avg_sq/")):
                    vals = [ml.shard(logical["model/" + n] if src is None else logical[src + n], kd, t, c.tp)
                            for n, ex, nodecay, kd, s in params]
                    world[key], numel = ml.distopt_world_tensors(vals, shared, bucket_size, c.dp, c.busbw)
                world["numel_unpadded"] = numel
                dtype_key = (torch.bfloat16 if c.bf16 else torch.float32, torch.float32)
                torch.save({"buckets_coalesced": True, 0: {dtype_key: world}}, os.path.join(d, "distrib_optim.pt"))
            sd = {"args": args, "checkpoint_version": 3.0, "iteration": 5, "model": model,
                  "optimizer": opts if len(opts) > 1 else opts[0],
                  "opt_param_scheduler": {"max_lr": 1e-3, "min_lr": 1e-4, "num_steps": 40, "lr_warmup_steps": 0,
                                          "lr_decay_steps": 100, "lr_decay_style": "cosine", "start_wd": 0.1,
                                          "end_wd": 0.1, "wd_incr_style": "constant", "wd_incr_steps": 100},
                  "rng_state": [{"torch_rng_state": torch.get_rng_state()}],
                  "num_floating_point_operations_so_far": 123.0}
            torch.save(sd, os.path.join(d, "model_optim_rng.pt"))
with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
    f.write("5")
os.makedirs(os.path.join(out, "expected"), exist_ok=True)
index = {}
for k, (name, tensor) in enumerate(logical.items()):
    fn = f"expected/{k}.bin"
    tensor.contiguous().numpy().tofile(os.path.join(out, fn))
    index[name] = {"shape": list(tensor.shape), "file": fn}
json.dump(index, open(os.path.join(out, "expected.json"), "w"), indent=1)
