"""Megatron-LM's own training scripts, run by `mxmaca train` unchanged but for their sizes.

usage: megatron_example_scripts.py MXMACA WORKDIR   (//tests/integration:megatron_example_scripts_test)

Each case is the pretrain_gpt.py flag set of a script of Megatron-LM at tag core_v0.19.0,
transcribed here flag for flag (shell variables filled with the scripts' own defaults where
they have one). To run in seconds on a CPU it is scaled down the way a user would try a
script first: flags appended after the script's (argparse's last-occurrence-wins rule,
which `mxmaca train` follows) set tiny sizes, a 4-rank layout, 2 iterations and local
paths; no flag of the script is edited. The script's flags MXMACA refuses are taken out of
the run and each is checked on its own: the run with it must stop with an error naming it
(the flag table's "unsupported" class, or a refused value), so the list below is exactly
what keeps the script from running as it is.

Checks per case: exit 0; Megatron's iteration log line for iteration 2; every notice line
names a flag the script passes (notice class: accepted, no effect); each refused flag is
refused by name.
"""
import json
import os
import re
import shutil
import subprocess
import sys

MXMACA, WORK = sys.argv[1], sys.argv[2]
# Optional third argument: the --device to run on (cpu by default; device-on-cpu runs the GPU
# backend's code path on the CPU kernels).
DEVICE = ["--device", sys.argv[3]] if len(sys.argv) > 3 else []
DATA = os.path.join(WORK, "data")

# Tiny sizes shared by every case (appended after the script's flags).
TINY_MODEL = [
    "--num-layers", "4", "--hidden-size", "64", "--ffn-hidden-size", "128",
    "--num-attention-heads", "4", "--seq-length", "64", "--max-position-embeddings", "64",
    "--micro-batch-size", "1", "--global-batch-size", "4", "--log-interval", "1",
    "--eval-interval", "2", "--eval-iters", "1", "--save-interval", "2", "--num-threads", "1",
]

CASES = [
    {
        "name": "gpt3_175b",
        "source": "examples/gpt3/train_gpt3_175b_distributed.sh",
        "flags": [
            # GPT_MODEL_ARGS
            "--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96",
            "--seq-length", "2048", "--max-position-embeddings", "2048",
            "--attention-backend", "auto",
            # TRAINING_ARGS
            "--micro-batch-size", "1", "--global-batch-size", "1536",
            "--step-batch-size-schedule", "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536",
            "--train-iters", "500000", "--weight-decay", "0.1", "--adam-beta1", "0.9",
            "--adam-beta2", "0.95", "--init-method-std", "0.006", "--clip-grad", "1.0",
            "--fp16", "--lr", "6.0e-5", "--lr-decay-style", "cosine", "--min-lr", "6.0e-6",
            "--lr-warmup-fraction", ".001", "--lr-decay-iters", "430000",
            # MODEL_PARALLEL_ARGS
            "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "16",
            # DATA_ARGS
            "--data-path", "@DATA@/gpt2_text_document", "--vocab-file", "@VOCAB@",
            "--merge-file", "@MERGES@", "--split", "949,50,1",
            # EVAL_AND_LOGGING_ARGS
            "--log-interval", "100", "--save-interval", "10000", "--eval-interval", "1000",
            "--save", "@CKPT@", "--load", "@CKPT@", "--eval-iters", "10",
            "--tensorboard-dir", "@TB@",
        ],
        # flag -> (how many values it takes, why MXMACA refuses it)
        "refused": {
            # Megatron-Core 0.19 itself stops on this script: validate_args raises "Cannot
            # specify both --step-batch-size-schedule and --global-batch-size".
            "--step-batch-size-schedule": (1, "batch-size schedules are not implemented"),
            "--fp16": (0, "fp16 with loss scaling is not implemented (--bf16 is)"),
        },
        "tiny": ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                 "--world-size", "4", "--train-iters", "2", "--lr-decay-iters", "2",
                 "--split", "90,9,1"],
    },
    {
        "name": "llama3_8b_mock",
        "source": "examples/llama/train_llama3_8b_h100_fp8.sh (DTYPE=fp8, MOCK data)",
        "flags": [
            # MODEL_ARGS
            "--use-mcore-models", "--num-layers", "32", "--hidden-size", "4096",
            "--ffn-hidden-size", "14336", "--num-attention-heads", "32",
            "--group-query-attention", "--num-query-groups", "8", "--kv-channels", "128",
            "--seq-length", "8192", "--max-position-embeddings", "8192",
            "--position-embedding-type", "rope", "--rotary-base", "1000000",
            "--rotary-percent", "1.0", "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
            "--swiglu", "--normalization", "RMSNorm", "--init-method-std", "0.0134",
            "--attention-backend", "fused", "--apply-layernorm-1p",
            "--untie-embeddings-and-output-weights", "--disable-bias-linear",
            # TRAINING_ARGS
            "--micro-batch-size", "1", "--global-batch-size", "128",
            "--train-samples", "1953125000", "--lr-decay-samples", "1949218748",
            "--lr-warmup-samples", "3906252", "--lr", "0.00015", "--min-lr", "0.00001",
            "--decoupled-lr", "5.0e-4", "--decoupled-min-lr", "4.5e-5",
            "--lr-decay-style", "cosine", "--clip-grad", "1.0", "--weight-decay", "0.1",
            "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--bf16", "--grad-reduce-in-bf16",
            "--cross-entropy-loss-fusion", "--calculate-per-token-loss", "--manual-gc",
            "--empty-unused-memory-level", "1", "--exit-duration-in-mins", "235",
            # DTYPE_ARGS (fp8)
            "--fp8-format", "hybrid", "--fp8-amax-history-len", "1024",
            "--fp8-amax-compute-algo", "max", "--fp8-param-gather",
            # MODEL_PARALLEL_ARGS
            "--tensor-model-parallel-size", "1", "--context-parallel-size", "1",
            "--sequence-parallel",
            # DDP_ARGS
            "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
            # DATA_ARGS_LIST (MOCK)
            "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128256",
            "--data-cache-path", "@CACHE@", "--tiktoken-pattern", "v2", "--split", "99,1,0",
            "--no-create-attention-mask-in-dataloader", "--no-mmap-bin-files",
            "--num-workers", "1",
            # EVAL_AND_LOGGING_ARGS
            "--log-interval", "1", "--eval-iters", "32", "--eval-interval", "100",
            "--save-interval", "1000", "--log-throughput", "--profile",
            "--profile-step-start", "4", "--profile-step-end", "6",
            "--ckpt-format", "torch_dist", "--distributed-timeout-minutes", "60",
            "--save", "@CKPT@", "--load", "@CKPT@", "--tensorboard-dir", "@TB@",
        ],
        "refused": {
            "--fp8-format": (1, "FP8 needs FP8 tensor cores and Transformer Engine"),
            "--ckpt-format": (1, "torch_dist is not written yet (docs/CHECKPOINTS.md)"),
        },
        "tiny": ["--num-query-groups", "2", "--kv-channels", "16", "--vocab-size", "4096",
                 "--tensor-model-parallel-size", "2", "--context-parallel-size", "2",
                 "--world-size", "4", "--train-samples", "8", "--lr-decay-samples", "8",
                 "--lr-warmup-samples", "4"],
    },
    {
        "name": "mixtral_8x7b",
        "source": "examples/mixtral/train_mixtral_8x7b_distributed.sh",
        "flags": [
            # MODEL_ARGS
            "--use-mcore-models", "--disable-bias-linear", "--seq-length", "4096",
            "--max-position-embeddings", "32768", "--num-layers", "32", "--hidden-size", "4096",
            "--ffn-hidden-size", "14336", "--num-attention-heads", "32",
            "--init-method-std", "0.01", "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
            "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--swiglu",
            "--untie-embeddings-and-output-weights", "--group-query-attention",
            "--num-query-groups", "8", "--no-masked-softmax-fusion", "--no-position-embedding",
            "--rotary-base", "1000000",
            # MOE_ARGS
            "--num-experts", "8", "--moe-router-topk", "2",
            "--moe-router-load-balancing-type", "aux_loss", "--moe-aux-loss-coeff", "1e-2",
            "--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall",
            "--overlap-param-gather", "--overlap-grad-reduce",
            # DATA_ARGS
            "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "@SPM@",
            "--data-path", "@DATA@/spm_text_document", "--split", "99990,8,2",
            # TRAINING_ARGS
            "--micro-batch-size", "1", "--global-batch-size", "256", "--lr", "1e-4",
            "--train-iters", "500000", "--lr-decay-iters", "320000",
            "--lr-decay-style", "cosine", "--min-lr", "1.0e-5", "--weight-decay", "0.1",
            "--lr-warmup-iters", "500", "--clip-grad", "1.0", "--bf16",
            # MODEL_PARALLEL_ARGS
            "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4",
            "--expert-model-parallel-size", "8", "--use-distributed-optimizer",
            "--sequence-parallel",
            # LOGGING_ARGS
            "--log-interval", "1", "--save-interval", "10000", "--eval-interval", "1000",
            "--eval-iters", "10", "--save", "@CKPT@", "--load", "@CKPT@",
            "--tensorboard-dir", "@TB@", "--no-load-optim", "--no-load-rng",
            "--wandb-project", "Mixtral", "--wandb-exp-name", "Mixtral_8x7B",
        ],
        "refused": {
            "--use-distributed-optimizer": (0, "the distributed optimizer with expert groups "
                                               "across data-parallel ranks (EP > TP)"),
            "--overlap-param-gather": (0, "needs the distributed optimizer (as in Megatron)"),
        },
        "tiny": ["--max-position-embeddings", "64", "--num-query-groups", "2",
                 "--num-experts", "4", "--pipeline-model-parallel-size", "2",
                 "--expert-model-parallel-size", "2", "--world-size", "4",
                 "--train-iters", "2", "--lr-decay-iters", "2", "--lr-warmup-iters", "1",
                 "--split", "90,9,1"],
    },
    {
        "name": "mixtral_8x7b_alltoall_functional",
        "source": "tests/functional_tests/test_cases/mixtral/"
                  "mixtral_8x7b_alltoall_tp2pp4ep4_release/model_config.yaml",
        "flags": [
            "--distributed-timeout-minutes", "60", "--tensor-model-parallel-size", "2",
            "--pipeline-model-parallel-size", "4", "--use-distributed-optimizer",
            "--overlap-grad-reduce", "--overlap-param-gather", "--no-ckpt-fully-parallel-save",
            "--use-mcore-models", "--sequence-parallel", "--use-flash-attn",
            "--disable-bias-linear", "--micro-batch-size", "1", "--global-batch-size", "1024",
            "--train-samples", "24414063", "--exit-duration-in-mins", "230",
            "--transformer-impl", "transformer_engine", "--data-cache-path", "@CACHE@",
            "--tokenizer-type", "GPTSentencePieceTokenizer", "--tokenizer-model", "@SPM@",
            "--data-path", "@DATA@/spm_text_document", "--split", "99,1,0",
            "--no-mmap-bin-files", "--num-workers", "6",
            "--untie-embeddings-and-output-weights", "--position-embedding-type", "rope",
            "--no-rope-fusion", "--rotary-percent", "0.5", "--normalization", "RMSNorm",
            "--swiglu", "--num-layers", "32", "--hidden-size", "4096",
            "--ffn-hidden-size", "14336", "--num-attention-heads", "32",
            "--group-query-attention", "--num-query-groups", "8", "--seq-length", "4096",
            "--max-position-embeddings", "4096", "--make-vocab-size-divisible-by", "128",
            "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--clip-grad", "1.0",
            "--weight-decay", "0.1", "--lr-decay-samples", "1949218748",
            "--lr-warmup-samples", "3906252", "--lr", "3.0e-4", "--min-lr", "3.0e-5",
            "--lr-decay-style", "cosine", "--adam-beta1", "0.9", "--adam-beta2", "0.95",
            "--expert-model-parallel-size", "4", "--num-experts", "8",
            "--moe-router-load-balancing-type", "aux_loss", "--moe-router-topk", "2",
            "--moe-grouped-gemm", "--moe-aux-loss-coeff", "1e-2",
            "--moe-token-dispatcher-type", "alltoall", "--eval-iters", "32",
            "--eval-interval", "200", "--save", "@CKPT@", "--load", "@CKPT@",
            "--save-interval", "5000", "--init-method-std", "0.010",
            "--log-timers-to-tensorboard", "--log-memory-to-tensorboard",
            "--log-num-zeros-in-grad", "--log-params-norm", "--log-validation-ppl-to-tensorboard",
            "--log-throughput", "--log-interval", "1", "--tensorboard-dir", "@TB@",
            "--wandb-project", "megatron-core-release-runs", "--wandb-entity", "adlr",
            "--wandb-exp-name", "mixtral", "--wandb-save-dir", "@WORK@/wandb", "--bf16",
            "--exit-interval", "24000",
        ],
        "refused": {
            "--use-distributed-optimizer": (0, "the distributed optimizer with expert groups "
                                               "across data-parallel ranks (EP > TP)"),
            "--overlap-param-gather": (0, "needs the distributed optimizer (as in Megatron)"),
        },
        # TP 1: Megatron's default --expert-tensor-parallel-size is TP, and MXMACA has no
        # expert tensor parallelism (ETP 1 only).
        "tiny": ["--num-query-groups", "2", "--num-experts", "4",
                 "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "2",
                 "--expert-model-parallel-size", "2",
                 "--world-size", "4", "--train-samples", "8", "--lr-decay-samples", "8",
                 "--lr-warmup-samples", "4", "--split", "90,9,1"],
    },
]


def fill(args, case):
    subs = {"@DATA@": DATA, "@VOCAB@": os.environ["VOCAB"], "@MERGES@": os.environ["MERGES"],
            "@SPM@": os.path.join(WORK, "spm.model"), "@WORK@": WORK,
            "@CKPT@": os.path.join(WORK, case["name"], "ckpt"),
            "@TB@": os.path.join(WORK, case["name"], "tb"),
            "@CACHE@": os.path.join(WORK, case["name"], "cache")}
    out = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        out.append(a)
    return out


def without(flags, refused):
    out, i = [], 0
    while i < len(flags):
        if flags[i] in refused:
            i += 1 + refused[flags[i]][0]
            continue
        out.append(flags[i])
        i += 1
    return out


def run(argv, log, case):
    shutil.rmtree(os.path.join(WORK, case["name"], "ckpt"), ignore_errors=True)
    with open(log, "w") as f:
        p = subprocess.run([MXMACA, "train"] + argv, stdout=f, stderr=subprocess.STDOUT,
                           timeout=600)
    return p.returncode, open(log).read()


def main():
    failures = []
    for case in CASES:
        name = case["name"]
        os.makedirs(os.path.join(WORK, name), exist_ok=True)
        script = fill(case["flags"], case)
        runnable = without(script, case["refused"]) + TINY_MODEL + fill(case["tiny"], case) + DEVICE
        rc, out = run(runnable, os.path.join(WORK, name, "train.log"), case)
        given = {a for a in script if a.startswith("--")}
        noticed = set(re.findall(r"^notice: (--[\w-]+) is accepted", out, re.M))
        problems = []
        if rc != 0:
            problems.append(f"exit {rc}: " + "\n".join(out.splitlines()[-5:]))
        if not re.search(r"iteration\s+2/\s+2 \|", out):
            problems.append("no log line for iteration 2/2")
        if noticed - given:
            problems.append(f"notices for flags the script does not pass: {noticed - given}")
        # Each refused flag on its own: the runnable command plus that flag must be refused by
        # name (an error line naming it, non-zero exit).
        for flag, (nvalues, why) in case["refused"].items():
            i = script.index(flag)
            one = without(script, case["refused"]) + script[i:i + 1 + nvalues] + TINY_MODEL + \
                fill(case["tiny"], case)
            rc1, out1 = run(one, os.path.join(WORK, name, flag.strip("-") + ".log"), case)
            errors = [l for l in out1.splitlines() if "error" in l and flag in l]
            if rc1 == 0 or not errors:
                problems.append(f"{flag} ({why}) was not refused by name: exit {rc1}")
        status = "FAIL" if problems else "ok"
        print(f"{status} {name} ({case['source']}): {len(given)} flags, "
              f"{len(noticed)} with a notice, {len(case['refused'])} refused: "
              f"{', '.join(case['refused']) or 'none'}")
        for p in problems:
            print("    " + p)
        if problems:
            failures.append(name)
    if failures:
        sys.exit(f"{len(failures)} of {len(CASES)} scripts failed: {', '.join(failures)}")
    print(f"all {len(CASES)} scripts ran")


if __name__ == "__main__":
    main()
