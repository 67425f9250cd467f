"""Reference rank groups computed the way Megatron-Core's parallel_state.py computes them.

A port (written for this test) of generate_masked_orthogonal_rank_groups and of the
RankGenerator / initialize_model_parallel wiring at core_v0.15.0: order 'tp-cp-ep-dp-pp',
decoder generator (tp, cp, ep=1, dp, pp), expert generator (etp, cp=1, ep, edp, pp),
embedding = first and last rank of each pp group (one rank when pp = 1), position
embedding = first rank.

Usage: megatron_rank_groups.py world,tp,pp,cp,ep,etp [...]
Prints one JSON object per argument: {"case": [...], "groups": {name: [[ranks]...]}}.
"""
import json
import sys

ORDER = ["tp", "cp", "ep", "dp", "pp"]


def prefix_product(values):
    out = [1]
    for v in values:
        out.append(out[-1] * v)
    return out


def decompose(index, shape):
    idx = []
    for size in shape:
        idx.append(index % size)
        index //= size
    return idx


def masked_groups(world_size, parallel_size, mask):
    masked_shape = [s for s, m in zip(parallel_size, mask) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask) if not m]
    stride = prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(stride, mask) if m]
    unmasked_stride = [d for d, m in zip(stride, mask) if not m]
    group_size = prefix_product(masked_shape)[-1]
    groups = []
    for group_index in range(world_size // group_size):
        g_idx = decompose(group_index, unmasked_shape)
        base = sum(i * d for i, d in zip(g_idx, unmasked_stride))
        group = []
        for r in range(group_size):
            r_idx = decompose(r, masked_shape)
            group.append(base + sum(i * d for i, d in zip(r_idx, masked_stride)))
        groups.append(group)
    return groups


def get_ranks(world, sizes, token):
    mask = [name in token.split("-") for name in ORDER]
    return masked_groups(world, [sizes[n] for n in ORDER], mask)


def all_groups(world, tp, pp, cp, ep, etp):
    if etp == 0:
        etp = tp
    dp = world // (tp * cp * pp)
    edp = world // (etp * ep * pp)
    dec = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    exp = {"tp": etp, "cp": 1, "ep": ep, "dp": edp, "pp": pp}
    pp_groups = get_ranks(world, dec, "pp")
    assert pp_groups == get_ranks(world, exp, "pp")
    return {
        "tensor_model_parallel": get_ranks(world, dec, "tp"),
        "pipeline_model_parallel": pp_groups,
        "data_parallel": get_ranks(world, dec, "dp"),
        "data_parallel_with_cp": get_ranks(world, dec, "dp-cp"),
        "context_parallel": get_ranks(world, dec, "cp"),
        "model_parallel": get_ranks(world, dec, "tp-pp"),
        "tensor_and_data_parallel": get_ranks(world, dec, "tp-dp"),
        "tensor_and_data_parallel_with_cp": get_ranks(world, dec, "tp-dp-cp"),
        "tensor_and_context_parallel": get_ranks(world, dec, "tp-cp"),
        "embedding": [[g[0]] if len(g) == 1 else [g[0], g[-1]] for g in pp_groups],
        "position_embedding": [[g[0]] for g in pp_groups],
        "expert_model_parallel": get_ranks(world, exp, "ep"),
        "expert_tensor_parallel": get_ranks(world, exp, "tp"),
        "expert_tensor_and_model_parallel": get_ranks(world, exp, "tp-ep"),
        "expert_tensor_model_pipeline_parallel": get_ranks(world, exp, "tp-ep-pp"),
        "expert_data_parallel": get_ranks(world, exp, "dp"),
    }


def main():
    for arg in sys.argv[1:]:
        case = [int(x) for x in arg.split(",")]
        print(json.dumps({"case": case, "groups": all_groups(*case)}))


if __name__ == "__main__":
    main()
