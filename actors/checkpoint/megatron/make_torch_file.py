#!/usr/bin/python3
"""make_torch_file.py OUT_DIR: torch.save (Debian's PyTorch 1.13) of a Megatron-style
legacy checkpoint dict with random tensors — args as an argparse.Namespace (torch dtypes,
Megatron enums, lists, None), OrderedDict model state in both layer-spec spellings with
fp32, bf16, int64, strided and storage-sharing tensors and _extra_state entries (None,
io.BytesIO, an empty uint8 tensor), a Megatron optimizer dict, the scheduler, rng_state
(Python random, numpy and torch generator states) and the rerun state — written to
OUT_DIR/iter_0000012/mp_rank_00/model_optim_rng.pt with the tracker file. Each tensor's
values also go to OUT_DIR/expected/<n>.bin (float32, C order) with OUT_DIR/expected.json
listing path, shape, dtype and file. Also writes OUT_DIR/evil.pt: a pickle whose
object's __reduce__ names posix.system (must be refused, never run)."""
import argparse
import collections
import io
import json
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_helpers as th  # noqa: E402

out = sys.argv[1]
torch.manual_seed(1234)
random.seed(5)
np.random.seed(7)

args = argparse.Namespace(
    num_layers=2, hidden_size=8, ffn_hidden_size=16, num_attention_heads=2, num_query_groups=None,
    tensor_model_parallel_size=1, pipeline_model_parallel_size=1, lr=3e-4, min_lr=3e-5,
    params_dtype=torch.bfloat16, main_grads_dtype=torch.float32, model_type=th.ModelType.encoder_or_decoder,
    attention_backend=th.AttnBackend.auto, consumed_train_samples=96, consumed_valid_samples=32,
    data_path=["1.0", "/data/corpus_text_document"], split="969,30,1", swiglu=True, load=None,
    betas=(0.9, 0.95), eps=1e-8, iteration=12, big_number=2**40, negative=-3, ckpt_format="torch",
    cuda_graph_modules=[], inf_value=float("inf"), tokenizer_type="GPT2BPETokenizer")

big = torch.randn(4, 8)
model = collections.OrderedDict()
model["embedding.word_embeddings.weight"] = torch.randn(16, 8)
model["decoder.layers.0.input_layernorm.weight"] = torch.ones(8) + 0.01 * torch.randn(8)
model["decoder.layers.0.self_attention.linear_qkv.weight"] = torch.randn(24, 8)
model["decoder.layers.0.self_attention.linear_qkv._extra_state"] = None
model["decoder.layers.0.self_attention.linear_proj.weight"] = torch.randn(8, 8).t()  # strided
model["decoder.layers.0.self_attention.linear_proj._extra_state"] = io.BytesIO(b"\x00fp8\xff")
model["decoder.layers.0.mlp.linear_fc1.weight"] = big[0:2]  # two views of one storage
model["decoder.layers.0.mlp.linear_fc2.weight"] = big[2:4]
model["decoder.layers.0.mlp.linear_fc1._extra_state"] = torch.empty(0, dtype=torch.uint8)
model["decoder.layers.1.self_attention.linear_qkv.layer_norm_weight"] = torch.randn(8).to(torch.bfloat16)
model["decoder.layers.1.mlp.router.expert_bias"] = torch.randn(4, dtype=torch.float64)
model["decoder.layers.1.mlp.experts.linear_fc1.weight0"] = torch.randn(32, 8).to(torch.float16)
model["decoder.final_layernorm.weight"] = torch.randn(8)
model["position_ids"] = torch.arange(6, dtype=torch.int64)

optimizer = {
    "optimizer": {
        "state": {0: {"step": torch.tensor(12.0), "exp_avg": torch.randn(16, 8),
                      "exp_avg_sq": torch.rand(16, 8)}},
        "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1,
                          "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                          "wd_mult": 1.0, "lr_mult": 1.0, "is_expert_parallel": False,
                          "is_decoupled_lr": False, "params": [0]}],
    },
    "fp32_from_fp16_params": [[torch.randn(16, 8)]],
}
state = {
    "args": args,
    "checkpoint_version": 3.0,
    "iteration": 12,
    "model": model,
    "optimizer": optimizer,
    "opt_param_scheduler": {"max_lr": 3e-4, "lr_warmup_steps": 2, "num_steps": 96, "lr_decay_style": "cosine",
                            "lr_decay_steps": 100, "min_lr": 3e-5, "start_wd": 0.1, "end_wd": 0.1,
                            "wd_incr_style": "constant", "wd_incr_steps": 100},
    "rng_state": [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                   "torch_rng_state": torch.get_rng_state(), "cuda_rng_state": torch.get_rng_state(),
                   "rng_tracker_states": {"model-parallel-rng": torch.get_rng_state()}}],
    "rerun_state_machine": {"mode": th.RerunMode.disabled, "rerun_requested": False, "data_iterator_checkpoints": None},
    "num_floating_point_operations_so_far": 1.5e12,
}

d = os.path.join(out, "iter_0000012", "mp_rank_00")
os.makedirs(d, exist_ok=True)
torch.save(state, os.path.join(d, "model_optim_rng.pt"))
with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
    f.write("12")

os.makedirs(os.path.join(out, "expected"), exist_ok=True)
index = {}
for n, (path, leaf) in enumerate(th.walk(state)):
    if isinstance(leaf, torch.Tensor):
        fn = os.path.join("expected", f"{n}.bin")
        leaf.detach().to(torch.float32).contiguous().numpy().tofile(os.path.join(out, fn))
        index[path] = {"shape": list(leaf.shape), "dtype": str(leaf.dtype).replace("torch.", ""), "file": fn}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(index, f, indent=1)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo this must never run > /dev/null",))


torch.save({"model": collections.OrderedDict(w=Evil())}, os.path.join(out, "evil.pt"))
