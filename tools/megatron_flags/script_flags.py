"""Lists the pretrain_gpt.py flags that Megatron-LM's own GPT, Llama, Mixtral, DeepSeek and
GPT-OSS training scripts and its GPT / MoE / Mixtral functional-test configs pass.

usage: /usr/bin/python3 tools/megatron_flags/script_flags.py MEGATRON_LM_DIR OUT.json

MEGATRON_LM_DIR: a checkout (or `git archive`) of Megatron-LM with examples/ and
tests/functional_tests/; api/args/testdata/megatron_core_v0.19.0_script_flags.json was made
from tag core_v0.19.0. Output: {source path: [flag, ...]} in the order the source gives them.
- tests/functional_tests/test_cases/{gpt,moe,mixtral}/*/model_config.yaml: the MODEL_ARGS
  keys (a key whose value is false is left out, as the functional-test launcher leaves it
  out); configs of inference and RL (GRPO) tests are skipped: they run other entry points.
- the example scripts below: every --flag token of the script, less the ones that belong
  to torchrun, sbatch/srun, nsys or the script's own command line (EXCLUDED).
//api/args:flag_table_scripts_test reads the output.
"""
import glob
import json
import os
import re
import sys

import yaml

EXAMPLES = [
    "examples/gpt3/train_gpt3_175b_distributed.sh",
    "examples/llama/train_llama3_8b_h100_fp8.sh",
    "examples/mixtral/train_mixtral_8x7b_distributed.sh",
    "examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh",
    "examples/gptoss/02_train.sh",
]
# Flags of torchrun, sbatch/srun, nsys and of the scripts' own command lines.
EXCLUDED = {
    "--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port",
    "--job-name", "--partition", "--nodes", "--ntasks-per-node", "--gres", "--time",
    "--account", "--exclusive", "--dependency", "--mpi", "--container-image",
    "--container-mounts", "--container-workdir", "--sample", "--cpuctxsw", "--trace",
    "--capture-range", "--capture-range-end", "--cuda-graph-trace", "--cuda-memory-usage",
    "--checkpoint-path", "--tensorboard-logs-path", "--tokenizer", "--data",
    "--distributed-config-file", "--help",
}


def main():
    root, out_path = sys.argv[1], sys.argv[2]
    out = {}
    for path in EXAMPLES:
        lines = []
        for line in open(os.path.join(root, path)).read().splitlines():
            if line.lstrip().startswith("#"):
                continue  # a comment line (commented-out flags are not passed)
            lines.append(line.split(" #")[0])  # a comment after the flag
        text = "\n".join(lines)
        flags = []
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9_-]*)", text):
            if flag not in EXCLUDED and flag not in flags:
                flags.append(flag)
        out[path] = flags
    pattern = os.path.join(root, "tests/functional_tests/test_cases/*/*/model_config.yaml")
    for path in sorted(glob.glob(pattern)):
        rel = os.path.relpath(path, root)
        family = rel.split("/")[3]
        if family not in ("gpt", "moe", "mixtral") or "inference" in rel or "grpo" in rel:
            continue
        config = yaml.safe_load(open(path))
        args = config.get("MODEL_ARGS") or {}
        out[rel] = [k for k, v in args.items()
                    if isinstance(k, str) and k.startswith("--") and v is not False]
    with open(out_path, "w") as f:
        f.write("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in out.items())
                + "\n}\n")
    print(f"{out_path}: {len(out)} sources, {len({f for v in out.values() for f in v})} flags")


if __name__ == "__main__":
    main()
