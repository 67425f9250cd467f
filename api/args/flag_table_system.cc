// api/args/flag_table_system.cc: rows of the flag table for Megatron's groups
// "distributed" .. "sft" (arguments.py `_add_distributed_args` .. `_add_sft_args`,
// NVIDIA/Megatron-LM commit 000c4ac2), in add_megatron_arguments order, then
// MXMACA's own flags.
#include <vector>

#include "api/args/flag_rows.h"

namespace mxmaca::api::flag_rows {
namespace {

constexpr const char* kRSharp = "NCCL/SHARP tuning; MXMACA picks its transport itself";
constexpr const char* kRMoeTune = "tunes an MoE feature MXMACA does not support";

constexpr FlagSpec kDistributed[] = {
    V("--tensor-model-parallel-size", kInt, "1", kImpl),
    V("--pipeline-model-parallel-size", kInt, "1", kImpl),
    V("--decoder-first-pipeline-num-layers", kInt, "None", kImpl),
    V("--decoder-last-pipeline-num-layers", kInt, "None", kImpl),
    V("--pipeline-model-parallel-layout", kStr, "None", kImpl),
    V("--model-parallel-size", kInt, "None", kUnsup, "removed; use --tensor-model-parallel-size"),
    V("--num-layers-per-virtual-pipeline-stage", kInt, "None", kImpl),
    V("--num-virtual-stages-per-pipeline-rank", kInt, "None", kImpl),
    V("--microbatch-group-size-per-virtual-pipeline-stage", kInt, "None", kNote, kRSchedule, "",
      "microbatch_group_size_per_vp_stage"),
    F("--no-overlap-p2p-communication", "overlap_p2p_comm", kNote, kRSchedule),
    T("--overlap-p2p-communication-warmup-flush", kNote, kRSchedule,
      "overlap_p2p_comm_warmup_flush"),
    V("--distributed-backend", kStr, "'nccl'", kNote, kRBackend, "nccl gloo"),
    V("--distributed-timeout-minutes", kInt, "10", kImpl),
    V("--distributed-timeout-seconds-after-init", kInt, "None", kNote,
      "MXMACA uses --distributed-timeout-minutes throughout"),
    T("--overlap-grad-reduce", kImpl),
    T("--defer-embedding-wgrad-compute", kNote, kRSchedule),
    V("--wgrad-deferral-limit", kInt, "0", kNote, kRSchedule),
    F("--no-align-grad-reduce", "align_grad_reduce", kNote, kRDdp),
    V("--ddp-num-buckets", kInt, "None", kNote, kRDdp),
    V("--ddp-bucket-size", kInt, "None", kImpl),
    T("--ddp-pad-buckets-for-high-nccl-busbw", kNote, kRDdp),
    T("--ddp-reduce-scatter-with-fp32-accumulation", kNote, kRDdp),
    T("--ddp-average-in-collective", kNote, kRDdp),
    T("--overlap-param-gather", kImpl),
    T("--overlap-param-gather-with-optimizer-step", kNote, kRDdp),
    F("--no-align-param-gather", "align_param_gather", kNote, kRDdp),
    F("--no-scatter-gather-tensors-in-pipeline", "scatter_gather_tensors_in_pipeline", kNote,
      kRSchedule),
    T("--use-ring-exchange-p2p", kNote, kRBackend),
    V("--local-rank", kInt, "int(os.getenv('LOCAL_RANK', '0'))", kNote,
      "MXMACA reads the rank from the launcher's environment"),
    V("--lazy-mpu-init", kBoolT, "None", kUnsup),
    T("--account-for-embedding-in-pipeline-split", kImpl),
    T("--account-for-loss-in-pipeline-split", kImpl),
    T("--use-distributed-optimizer", kImpl),
    T("--use-nccl-ub", kNote, kRSharp, "nccl_ub"),
    T("--disable-symmetric-registration", kNote, kRSharp),
    T("--use-sharp", kNote, kRSharp),
    V("--sharp-enabled-group", kStr, "None", kNote, kRSharp, "dp dp_replica"),
    T("--use-megatron-fsdp", kUnsup),
    T("--init-model-with-meta-device", kNote, kRPython),
    V("--data-parallel-sharding-strategy", kStr, "'no_shard'", kNote, kRFsdp,
      "no_shard optim optim_grads optim_grads_params"),
    F("--no-gradient-reduce-div-fusion", "gradient_reduce_div_fusion", kNote, kRKernel),
    T("--fsdp-double-buffer", kNote, kRFsdp),
    V("--suggested-communication-unit-size", kInt, "None", kNote, kRFsdp),
    T("--keep-fp8-transpose-cache", kNote, kRFsdp),
    T("--enable-full-sharding-in-hsdp", kNote, kRFsdp),
    V("--num-distributed-optimizer-instances", kInt, "1", kUnsup),
    T("--use-torch-fsdp2", kUnsup),
    F("--torch-fsdp2-no-reshard-after-forward", "torch_fsdp2_reshard_after_forward", kNote, kRFsdp),
    V("--context-parallel-size", kInt, "1", kImpl),
    V("--cp-comm-type", kStr, "['p2p']", kNote,
      "MXMACA's context parallelism is ring (p2p) attention", "", "", kPlus),
    V("--hierarchical-context-parallel-sizes", kInt, "None", kUnsup, "", "", "", kPlus),
    V("--nccl-communicator-config-path", kStr, "None", kNote, kRSharp),
    T("--use-tp-pp-dp-mapping", kUnsup, "MXMACA uses Megatron's default tp-cp-ep-dp-pp order"),
    T("--replication", kUnsup),
    V("--replication-jump", kInt, "None", kNote, kRReplication),
    V("--replication-factor", kInt, "2", kNote, kRReplication),
};

constexpr FlagSpec kValidation[] = {
    T("--full-validation", kUnsup),
    T("--multiple-validation-sets", kUnsup),
    V("--eval-iters", kInt, "100", kImpl),
    V("--eval-interval", kInt, "1000", kImpl),
    T("--test-mode", kNote, "Megatron's functional-test hooks"),
    T("--skip-train", kImpl),
};

constexpr FlagSpec kData[] = {
    V("--data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--split", kStr, "None", kImpl),
    V("--train-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--valid-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--test-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--data-args-path", kStr, "None", kUnsup),
    V("--per-split-data-args-path", kStr, "None", kUnsup),
    V("--data-cache-path", kStr, "None", kImpl),
    F("--no-mmap-bin-files", "mmap_bin_files", kNote, "I/O choice of the dataset reader"),
    T("--mock-data", kImpl),
    V("--seq-length", kInt, "None", kImpl),
    V("--encoder-seq-length", kInt, "None", kUnsup, "T5 encoder-decoder models"),
    V("--decoder-seq-length", kInt, "None", kUnsup, "T5 encoder-decoder models"),
    V("--retriever-seq-length", kInt, "256", kNote, kRNotGpt),
    V("--sample-rate", kFloat, "1.0", kNote, kRNotGpt),
    V("--mask-prob", kFloat, "0.15", kNote, kRNotGpt),
    V("--short-seq-prob", kFloat, "0.1", kNote, kRNotGpt),
    V("--num-workers", kInt, "2", kImpl),
    T("--reset-position-ids", kImpl),
    T("--reset-attention-mask", kImpl),
    T("--eod-mask-loss", kImpl),
    F("--no-create-attention-mask-in-dataloader", "create_attention_mask_in_dataloader", kImpl),
    V("--num-dataset-builder-threads", kInt, "1", kNote,
      "MXMACA builds dataset indices on one thread"),
    V("--object-storage-cache-path", kStr, "None", kUnsup, "S3/MSC object storage"),
    V("--mid-level-dataset-surplus", kFloat, "0.005", kImpl),
    T("--allow-ambiguous-pad-tokens", kNote, "GPT-2 BPE has no pad token"),
};

constexpr FlagSpec kTokenizer[] = {
    V("--vocab-size", kInt, "None", kImpl),
    V("--padded-vocab-size", kInt, "None", kImpl),
    V("--vocab-file", kStr, "None", kImpl),
    V("--merge-file", kStr, "None", kImpl),
    V("--vocab-extra-ids", kInt, "0", kImpl),
    V("--tokenizer-type", kStr, "None", kImpl,
      "pretrain_gpt's default is GPT2BPETokenizer; validation accepts GPT2BPETokenizer, "
      "HuggingFaceTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
      "Llama2Tokenizer, TikTokenizer and NullTokenizer",
      "BertWordPieceLowerCase BertWordPieceCase GPT2BPETokenizer SentencePieceTokenizer "
      "GPTSentencePieceTokenizer HuggingFaceTokenizer Llama2Tokenizer TikTokenizer "
      "MultimodalTokenizer NullTokenizer NullMultimodalTokenizer SFTTokenizer"),
    V("--tokenizer-model", kStr, "None", kImpl),
    V("--tokenizer-metadata", kStr, "None", kUnsup),
    V("--tiktoken-pattern", kStr, "None", kImpl),
    V("--tiktoken-num-special-tokens", kInt, "1000", kImpl),
    V("--tiktoken-special-tokens", kStr, "None", kImpl, "", "", "", kPlus),
    T("--legacy-tokenizer", kImpl),
    T("--trust-remote-code", kNote,
      "MXMACA reads tokenizer.json itself and runs no model code"),
};

constexpr FlagSpec kAutoresume[] = {
    T("--adlr-autoresume", kNote, kRNvInternal),
    V("--adlr-autoresume-interval", kInt, "1000", kNote, kRNvInternal),
};

constexpr FlagSpec kBiencoder[] = {
    V("--ict-head-size", kInt, "None", kNote, kRNotGpt),
    V("--biencoder-projection-dim", kInt, "0", kNote, kRNotGpt),
    T("--biencoder-shared-query-context-model", kNote, kRNotGpt),
    V("--ict-load", kStr, "None", kNote, kRNotGpt),
    V("--bert-load", kStr, "None", kNote, kRNotGpt),
    V("--titles-data-path", kStr, "None", kNote, kRNotGpt),
    V("--query-in-block-prob", kFloat, "0.1", kNote, kRNotGpt),
    T("--use-one-sent-docs", kNote, kRNotGpt),
    V("--evidence-data-path", kStr, "None", kNote, kRNotGpt),
    V("--retriever-report-topk-accuracies", kInt, "[]", kNote, kRNotGpt, "", "", kPlus),
    T("--retriever-score-scaling", kNote, kRNotGpt),
    V("--block-data-path", kStr, "None", kNote, kRNotGpt),
    V("--embedding-path", kStr, "None", kNote, kRNotGpt),
    V("--indexer-batch-size", kInt, "128", kNote, kRNotGpt),
    V("--indexer-log-interval", kInt, "1000", kNote, kRNotGpt),
};

constexpr FlagSpec kVision[] = {
    V("--num-classes", kInt, "1000", kNote, kRNotGpt),
    V("--img-h", kInt, "224", kNote, kRNotGpt),
    V("--img-w", kInt, "224", kNote, kRNotGpt),
    V("--num-channels", kInt, "3", kNote, kRNotGpt),
    V("--patch-dim", kInt, "16", kNote, kRNotGpt),
    V("--classes-fraction", kFloat, "1.0", kNote, kRNotGpt),
    V("--data-per-class-fraction", kFloat, "1.0", kNote, kRNotGpt),
    F("--no-data-sharding", "data_sharding", kNote, kRNotGpt),
    V("--head-lr-mult", kFloat, "1.0", kNote, kRNotGpt),
    T("--vision-pretraining", kNote, kRNotGpt),
    V("--vision-pretraining-type", kStr, "'classify'", kNote, kRNotGpt, "classify inpaint dino"),
    V("--vision-backbone-type", kStr, "'vit'", kNote, kRNotGpt, "vit mit swin"),
    V("--swin-backbone-type", kStr, "'tiny'", kNote, kRNotGpt, "tiny base h3"),
    V("--mask-type", kStr, "'random'", kNote, kRNotGpt, "random row"),
    V("--mask-factor", kFloat, "1.0", kNote, kRNotGpt),
    V("--iter-per-epoch", kInt, "1250", kNote, kRNotGpt),
    V("--dino-local-img-size", kInt, "96", kNote, kRNotGpt),
    V("--dino-local-crops-number", kInt, "10", kNote, kRNotGpt),
    V("--dino-head-hidden-size", kInt, "2048", kNote, kRNotGpt),
    V("--dino-bottleneck-size", kInt, "256", kNote, kRNotGpt),
    V("--dino-freeze-last-layer", kFloat, "1", kNote, kRNotGpt),
    T("--dino-norm-last-layer", kNote, kRNotGpt),
    V("--dino-warmup-teacher-temp", kFloat, "0.04", kNote, kRNotGpt),
    V("--dino-teacher-temp", kFloat, "0.07", kNote, kRNotGpt),
    V("--dino-warmup-teacher-temp-epochs", kInt, "30", kNote, kRNotGpt),
    T("--qk-layernorm", kImpl),
    T("--qk-l2-norm", kUnsup),
};

constexpr FlagSpec kMoe[] = {
    V("--expert-model-parallel-size", kInt, "1", kImpl),
    V("--expert-tensor-parallel-size", kInt, "None", kImpl),
    V("--num-experts", kInt, "None", kImpl),
    V("--moe-layer-freq", kCustom, "1", kImpl, "an int N or a Python list pattern"),
    V("--moe-ffn-hidden-size", kInt, "None", kImpl),
    V("--moe-shared-expert-intermediate-size", kInt, "None", kImpl),
    T("--moe-shared-expert-overlap", kNote, kRMoeComm),
    T("--moe-grouped-gemm", kNote, kRKernel),
    T("--moe-use-legacy-grouped-gemm", kNote, kRKernel),
    T("--moe-layer-recompute", kUnsup),
    T("--moe-extended-tp", kUnsup, "removed; use --expert-tensor-parallel-size"),
    T("--moe-use-upcycling", kUnsup),
    V("--moe-router-load-balancing-type", kStr, "'aux_loss'", kImpl, "",
      "aux_loss seq_aux_loss global_aux_loss sinkhorn none", "", kPlus),
    V("--moe-router-dtype", kStr, "None", kNote, "MXMACA routes in fp32", "fp32 fp64"),
    T("--moe-router-fusion", kNote, kRKernel),
    V("--moe-router-score-function", kStr, "'softmax'", kImpl, "", "softmax sigmoid"),
    V("--moe-router-topk", kInt, "2", kImpl),
    T("--moe-router-pre-softmax", kImpl),
    V("--moe-router-num-groups", kInt, "None", kImpl),
    V("--moe-router-group-topk", kInt, "None", kImpl),
    V("--moe-router-topk-scaling-factor", kFloat, "None", kImpl),
    T("--moe-router-enable-expert-bias", kImpl),
    V("--moe-router-bias-update-rate", kFloat, "0.001", kImpl),
    T("--moe-router-force-load-balancing", kUnsup),
    T("--moe-router-padding-for-fp8", kNote, kRFp8),
    V("--moe-aux-loss-coeff", kFloat, "0.0", kImpl, "", "", "", kPlus),
    V("--moe-z-loss-coeff", kFloat, "None", kImpl),
    V("--moe-input-jitter-eps", kFloat, "None", kUnsup),
    T("--moe-per-layer-logging", kNote, "per-layer MoE logging is not implemented"),
    V("--moe-token-dispatcher-type", kStr, "'allgather'", kImpl, "",
      "allgather alltoall flex hierarchical"),
    T("--moe-enable-deepep", kNote, kRMoeComm),
    V("--moe-deepep-num-sms", kInt, "20", kNote, kRMoeComm),
    T("--moe-permute-fusion", kNote, kRKernel),
    V("--moe-expert-capacity-factor", kFloat, "None", kImpl),
    T("--moe-pad-expert-input-to-capacity", kImpl),
    V("--moe-token-drop-policy", kStr, "'probs'", kImpl, "", "probs position"),
    T("--moe-apply-probs-on-input", kUnsup),
    T("--overlap-moe-expert-parallel-comm", kNote, kRMoeComm),
    T("--delay-wgrad-compute", kNote, "MXMACA's scheduler defers W work itself"),
    V("--moe-upcycling-granularity", kInt, "1", kNote, kRMoeTune),
    T("--moe-pad-experts-for-cuda-graph-inference", kNote, kRInference),
};

constexpr FlagSpec kMla[] = {
    V("--q-lora-rank", kInt, "None", kNote, kRMla),
    V("--kv-lora-rank", kInt, "32", kNote, kRMla),
    V("--qk-head-dim", kInt, "128", kNote, kRMla),
    V("--qk-pos-emb-head-dim", kInt, "64", kNote, kRMla),
    V("--v-head-dim", kInt, "128", kNote, kRMla),
    V("--rotary-scaling-factor", kFloat, "1.0", kNote, kRMla),
    V("--mscale", kFloat, "1.0", kNote, kRMla),
    V("--mscale-all-dim", kFloat, "0.0", kNote, kRMla),
    T("--cache-mla-latents", kNote, kRInference),
};

constexpr FlagSpec kHeterogeneous[] = {
    V("--heterogeneous-layers-config-path", kStr, "None", kUnsup),
    V("--heterogeneous-layers-config-encoded-json", kStr, "None", kUnsup),
};

constexpr FlagSpec kLogging[] = {
    T("--log-params-norm", kImpl,
      "the log line's 'params norm' and the 'params-norm' scalar; one process only"),
    T("--log-num-zeros-in-grad", kImpl,
      "the log line's 'num zeros' and the 'num-zeros' scalar; one process only"),
    T("--log-throughput", kImpl,
      "the log line always shows throughput; with --log-timers-to-tensorboard also the "
      "'throughput' scalar"),
    T("--log-progress", kNote, kRTiming),
    V("--timing-log-level", kInt, "0", kNote, kRTiming, "0 1 2"),
    T("--log-energy", kNote, "energy counters are not read"),
    F("--no-barrier-with-level-1-timing", "barrier_with_L1_time", kNote, kRTiming),
    V("--timing-log-option", kStr, "'minmax'", kNote, kRTiming, "max minmax all"),
    V("--tensorboard-log-interval", kInt, "1", kImpl),
    V("--tensorboard-queue-size", kInt, "1000", kImpl,
      "scalars queued before a write; the file is also flushed at every log line and evaluation"),
    T("--log-timers-to-tensorboard", kImpl,
      "'iteration-time' (and 'throughput' with --log-throughput); the --timing-log-level "
      "timers are not measured"),
    F("--no-log-loss-scale-to-tensorboard", "log_loss_scale_to_tensorboard", kImpl),
    T("--log-validation-ppl-to-tensorboard", kImpl),
    T("--log-memory-to-tensorboard", kImpl,
      "writes 'mem-peak-activation-bytes' (largest stage stash per log interval); torch's "
      "allocator counters have no counterpart"),
    T("--log-world-size-to-tensorboard", kImpl),
    // Two switches of Megatron before July 2024 (removed by commit 07659f9, "Add option to
    // decrease batch size"), accepted so that older scripts run unchanged.
    T("--log-batch-size-to-tensorboard", kNote,
      "Megatron before 07659f9 (2024); 'batch-size' is always written, as Megatron does now"),
    FlagSpec{"--no-log-learnig-rate-to-tensorboard", "--no-log-learning-rate-to-tensorboard",
             "log_learning_rate_to_tensorboard", FlagAction::kStoreFalse, kOne, FlagType::kNone,
             "True", "", kImpl,
             "Megatron before 07659f9 (2024), its spelling; no 'learning-rate' scalars", "",
             FlagOrigin::kMegatron},
    V("--wandb-project", kStr, "''", kNote, kRWandb),
    V("--wandb-entity", kStr, "''", kNote, kRWandb),
    V("--wandb-exp-name", kStr, "''", kNote, kRWandb),
    V("--wandb-save-dir", kStr, "''", kNote, kRWandb),
    V("--logging-level", kInt, "None", kNote, kRPython),
};

constexpr FlagSpec kStraggler[] = {
    T("--log-straggler", kNote, kRStraggler),
    T("--disable-straggler-on-startup", kNote, kRStraggler),
    V("--straggler-ctrlr-port", kInt, "65535", kNote, kRStraggler),
    V("--straggler-minmax-count", kInt, "1", kNote, kRStraggler),
};

constexpr FlagSpec kWorkloadInspector[] = {
    T("--run-workload-inspector-server", kNote, kRNvInternal),
};

constexpr FlagSpec kInference[] = {
    V("--inference-batch-times-seqlen-threshold", kInt, "-1", kNote, kRInference),
    V("--max-tokens-to-oom", kInt, "12000", kNote, kRInference),
    T("--output-bert-embeddings", kNote, kRInference),
    V("--bert-embedder-type", kStr, "'megatron'", kNote, kRInference, "megatron huggingface"),
    T("--flash-decode", kNote, kRInference),
    T("--enable-cuda-graph", kImpl),
    V("--cuda-graph-warmup-steps", kInt, "3", kImpl),
    T("--external-cuda-graph", kImpl),
    V("--cuda-graph-impl", kStr, "'none'", kImpl, "", "none local transformer_engine"),
    V("--cuda-graph-scope", kStr, "'full'", kImpl, "", "full attn full_iteration"),
    T("--use-legacy-static-engine", kNote, kRInference),
    V("--inference-max-requests", kInt, "8", kNote, kRInference, "", "inference_max_batch_size"),
    V("--inference-max-seq-length", kInt, "2560", kNote, kRInference),
    V("--inference-max-batch-size", kInt, "None", kNote, kRInference),
    T("--inference-dynamic-batching", kNote, kRInference),
    V("--inference-dynamic-batching-buffer-size-gb", kFloat, "40.0", kNote, kRInference),
    V("--inference-dynamic-batching-block-size", kInt, "256", kNote, kRInference),
    V("--inference-dynamic-batching-buffer-guaranteed-fraction", kFloat, "0.2", kNote, kRInference),
    V("--inference-dynamic-batching-buffer-overflow-factor", kFloat, "None", kNote, kRInference),
    V("--inference-dynamic-batching-max-requests-override", kInt, "None", kNote, kRInference),
    V("--inference-dynamic-batching-max-tokens-override", kInt, "None", kNote, kRInference),
    V("--inference-dynamic-batching-num-cuda-graphs", kInt, "16", kNote, kRInference),
    T("--inference-dynamic-batching-track-paused-request-events", kNote, kRInference),
    T("--decode-only-cuda-graphs", kNote, kRInference),
    V("--inference-dynamic-batching-unified-memory-level", kInt, "0", kNote, kRInference, "0 1"),
    V("--symmetric-ar-type", kStr, "None", kNote, kRInference,
      "two_shot one_shot multimem_all_reduce"),
    T("--nccl-all-reduce-for-prefill", kNote, kRInference),
    V("--mlp-chunks-for-prefill", kInt, "1", kNote, kRInference),
    T("--disable-chunked-prefill", kNote, kRInference),
    V("--inference-wandb-logging-step-interval", kInt, "0", kNote, kRInference),
};

constexpr FlagSpec kTransformerEngine[] = {
    V("--fp8-format", kStr, "None", kUnsup, "FP8 training", "e4m3 hybrid", "fp8"),
    V("--fp8-recipe", kStr, "'delayed'", kNote, kRFp8, "tensorwise delayed mxfp8 blockwise custom"),
    V("--fp8-quantizer-factory", kStr, "None", kNote, kRFp8),
    V("--fp8-margin", kInt, "0", kNote, kRFp8),
    V("--fp8-interval", kInt, "1", kNote, kRFp8),
    V("--fp8-amax-history-len", kInt, "1", kNote, kRFp8),
    V("--fp8-amax-compute-algo", kStr, "'most_recent'", kNote, kRFp8, "most_recent max"),
    F("--no-fp8-wgrad", "fp8_wgrad", kNote, kRFp8),
    V("--transformer-impl", kStr, "'transformer_engine'", kNote, kRTe, "local transformer_engine"),
    T("--fp8-param-gather", kNote, kRFp8),
    T("--first-last-layers-bf16", kNote, kRFp8),
    V("--num-layers-at-start-in-bf16", kInt, "1", kNote, kRFp8),
    V("--num-layers-at-end-in-bf16", kInt, "1", kNote, kRFp8),
    V("--fp4-format", kStr, "None", kUnsup, "FP4 training", "e2m1", "fp4"),
    V("--fp4-recipe", kStr, "'nvfp4'", kNote, kRFp8, "nvfp4 custom"),
    V("--fp4-quantizer-factory", kStr, "None", kNote, kRFp8),
    T("--fp4-param-gather", kNote, kRFp8, "fp4_param"),
    T("--te-rng-tracker", kNote, kRTe),
    T("--inference-rng-tracker", kNote, kRInference),
};

constexpr FlagSpec kRetro[] = {
    V("--retro-project-dir", kStr, "None", kUnsup, "Retro"),
    T("--retro-add-retriever", kUnsup, "Retro"),
    V("--retro-cyclic-train-iters", kInt, "None", kNote, kRRetro),
    V("--retro-encoder-layers", kInt, "2", kNote, kRRetro),
    V("--retro-encoder-hidden-dropout", kFloat, "0.1", kNote, kRRetro),
    V("--retro-encoder-attention-dropout", kFloat, "0.1", kNote, kRRetro),
    V("--retro-num-neighbors", kInt, "2", kNote, kRRetro),
    V("--retro-num-retrieved-chunks", kInt, "2", kNote, kRRetro),
    V("--retro-attention-gate", kFloat, "1", kNote, kRRetro),
    F("--retro-no-verify-neighbor-count", "retro_verify_neighbor_count", kNote, kRRetro),
};

constexpr FlagSpec kExperimental[] = {
    T("--enable-experimental", kNote, "Megatron's experimental code paths"),
    V("--spec", kStr, "None", kUnsup, "custom module specs", "", "", kStar),
    V("--hybrid-attention-ratio", kFloat, "0.0", kNote, kRMamba),
    V("--hybrid-mlp-ratio", kFloat, "0.0", kNote, kRMamba),
    V("--hybrid-override-pattern", kStr, "None", kNote, kRMamba),
    V("--mamba-state-dim", kInt, "128", kNote, kRMamba),
    V("--mamba-head-dim", kInt, "64", kNote, kRMamba),
    V("--mamba-num-groups", kInt, "8", kNote, kRMamba),
    V("--mamba-num-heads", kInt, "None", kNote, kRMamba),
    T("--is-hybrid-model", kUnsup, "Mamba hybrid models"),
    T("--disable-mamba-mem-eff-path", kNote, kRMamba),
    V("--yaml-cfg", kStr, "None", kUnsup, "YAML configs"),
    T("--use-precision-aware-optimizer", kImpl, "required by --optimizer-cpu-offload; fp32 states"),
    V("--main-grads-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 bf16"),
    V("--main-params-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16"),
    V("--exp-avg-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16 bf16 fp8"),
    V("--exp-avg-sq-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16 bf16 fp8"),
};

constexpr FlagSpec kOneLogger[] = {
    F("--no-one-logger", "enable_one_logger", kNote, kRNvInternal),
    V("--one-logger-project", kStr, "'megatron-lm'", kNote, kRNvInternal),
    V("--one-logger-run-name", kStr, "None", kNote, kRNvInternal),
    T("--one-logger-async", kNote, kRNvInternal),
    V("--app-tag-run-name", kStr, "None", kNote, kRNvInternal),
    V("--app-tag-run-version", kStr, "'0.0.0'", kNote, kRNvInternal),
};

constexpr FlagSpec kInprocessRestart[] = {
    T("--inprocess-restart", kUnsup, "in-process restart"),
    V("--inprocess-max-iterations", kInt, "None", kNote, kRInproc),
    V("--inprocess-monitor-thread-interval", kFloat, "1.0", kNote, kRInproc),
    V("--inprocess-monitor-process-interval", kFloat, "1.0", kNote, kRInproc),
    V("--inprocess-progress-watchdog-interval", kFloat, "1.0", kNote, kRInproc),
    V("--inprocess-heartbeat-interval", kFloat, "30", kNote, kRInproc),
    V("--inprocess-soft-timeout", kFloat, "60", kNote, kRInproc),
    V("--inprocess-hard-timeout", kFloat, "90", kNote, kRInproc),
    V("--inprocess-heartbeat-timeout", kFloat, "60", kNote, kRInproc),
    V("--inprocess-barrier-timeout", kFloat, "120", kNote, kRInproc),
    V("--inprocess-completion-timeout", kFloat, "120", kNote, kRInproc),
    V("--inprocess-last-call-wait", kFloat, "1", kNote, kRInproc),
    V("--inprocess-termination-grace-time", kFloat, "1", kNote, kRInproc),
    V("--inprocess-granularity", kStr, "'node'", kNote, kRInproc, "node rank"),
    V("--inprocess-active-world-size", kInt, "int(os.getenv('WORLD_SIZE', '1'))", kNote, kRInproc),
    T("--inprocess-empty-cuda-cache", kNote, kRInproc),
};

constexpr FlagSpec kFtPackage[] = {
    T("--enable-ft-package", kNote, kRNvInternal),
    T("--calc-ft-timeouts", kNote, kRNvInternal),
};

constexpr FlagSpec kConfigLogger[] = {
    V("--config-logger-dir", kStr, "''", kNote, "Megatron's config dumps are not written"),
};

constexpr FlagSpec kRerunEngine[] = {
    V("--error-injection-rate", kInt, "0", kNote, kRRerun),
    V("--error-injection-type", kStr, "'transient_error'", kNote, kRRerun,
      "correct_result transient_error persistent_error"),
    V("--rerun-mode", kStr, "'validate_results'", kNote, kRRerun,
      "disabled validate_results report_stats"),
};

constexpr FlagSpec kMsc[] = {
    F("--disable-msc", "enable_msc", kNote, "Multi-Storage Client is not used"),
};

// Only added by Megatron when NVIDIA's Kitchen library is importable.
constexpr FlagSpec kKitchen[] = {
    V("--kitchen-config-file", kStr, "None", kUnsup, "Kitchen quantization"),
    V("--kitchen-recipe-number", kInt, "None", kUnsup, "Kitchen quantization"),
};

constexpr FlagSpec kSft[] = {
    T("--sft", kUnsup, "supervised fine-tuning datasets"),
    V("--sft-tokenizer-prompt-format", kStr, "'nemotron-h-aligned'", kNote,
      "tunes --sft, which MXMACA does not support"),
};

// MXMACA's own flags. The default column is MXMACA's.
constexpr FlagSpec kMxmaca[] = {
    Ours(V("--max-consecutive-nan-iterations", kInt, "1", kImpl,
           "stop with an error after K iterations in a row whose loss or grad norm is "
           "NaN/Inf (those skip the optimizer step); 1 = Megatron's fail-on-first")),
    Ours(V("--trace-file", kStr, "None", kImpl,
           "write a Chrome/Perfetto trace of every actor's F/B/W timeline")),
    Ours(V("--metrics-jsonl", kStr, "None", kImpl,
           "one JSON object per log line and evaluation (docs/TRAINING.md); `mxmaca plot "
           "--metrics FILE` draws loss, throughput and bubble")),
    Ours(V("--num-threads", kInt, "None", kImpl,
           "CPU compute threads; default: the number of cores")),
    Ours(V("--world-size", kInt, "None", kImpl,
           "ranks of this job run in this process (the in-process backend); data parallel "
           "size = world size / (tensor x pipeline x context parallel); default: "
           "tensor x pipeline x context parallel (data parallel 1)")),
    Ours(T("--softmax-over-padded-vocab", kImpl,
           "include the padded vocabulary rows in the cross-entropy's softmax as Megatron "
           "does; the loss then depends on the padded size, i.e. on TP; default: padded "
           "rows are masked out, so the loss does not depend on TP")),
    Ours(T("--dynamic-pipeline", kImpl,
           "stage actors run ready weight-gradient work (and the next forward, within "
           "--max-stashed-microbatches) when the next scheduled op waits for its input; "
           "bit-identical to the static schedule")),
    Ours(T("--optimizer-post-validation", kImpl,
           "zero-bubble post-validation (Qi et al., ICLR 2024, sec. 4): stages step "
           "optimistically from the partial grad-norm / NaN reduction and roll back and redo "
           "when the global check disagrees; bit-identical to the synchronous step "
           "(--enable-optimizer-post-validation is the zero-bubble authors' Megatron fork's "
           "name)",
           "", "False", "--enable-optimizer-post-validation")),
    Ours(V("--max-stashed-microbatches", kInt, "None", kImpl,
           "with --dynamic-pipeline: stashes (micro-batch x chunk) a stage may hold; "
           "default: the static schedule's peak on that stage")),
    Ours(V("--inject-stage-slowdown", kStr, "None", kImpl,
           "STAGE:FACTOR[:FROM_ITER]: every op of pipeline stage STAGE takes FACTOR times "
           "as long from iteration FROM_ITER on (tests and benchmarks)")),
    Ours(V("--rebalance-threshold", kFloat, "None", kImpl,
           "move a layer from the slowest pipeline stage to its less busy neighbour when "
           "its busy time exceeds the mean by this fraction for --rebalance-window "
           "iterations (one model chunk per stage, no distributed optimizer)")),
    Ours(V("--rebalance-window", kInt, "3", kImpl,
           "iterations in a row over --rebalance-threshold before a layer moves")),
    Ours(V("--force-layer-move", kStr, "None", kImpl,
           "ITER:FROM:TO: after iteration ITER move the boundary layer from pipeline stage "
           "FROM to its neighbour TO (tests)")),
    Ours(V("--pipeline-channel-slots", kInt, "None", kImpl,
           "cap on activation/gradient payloads in flight per pipeline channel (never "
           "below what the schedule needs to progress); default: what the schedule can "
           "use, so back-pressure never stalls it")),
    Ours(V("--pipeline-schedule", kStr, "None", kImpl,
           "1f1b, gpipe, interleaved-1f1b, zb-h1, zb-h2 or zb-v; default: Megatron's choice "
           "(interleaved 1F1B with virtual stages, else 1F1B)")),
    Ours(V("--synthetic-op-ms", kStr, "None", kImpl,
           "F,B,W[,OPT]: run the job's pipeline layout on the synthetic backend instead of "
           "the GPT: every forward / input-gradient / weight-gradient op takes F / B / W ms "
           "per micro-batch and model chunk (OPT: each optimizer step's ms); no model, "
           "tokenizer or data files needed (api/train/synthetic_train.h)")),
    Ours(T("--no-cuda-graph", kImpl,
           "--device cuda: run every op eagerly instead of capturing each op segment into a "
           "CUDA graph (the device backend's default; docs/CUDA.md)")),
    Ours(V("--device", kStr, "None", kImpl,
           "the backend the model runs on: cpu (the CPU backend, the reference; the default), "
           "cuda (the GPU backend: each stage actor's model on its own CUDA stream with device-resident "
           "activations; host fp32 master weights and AdamW), device-on-cpu (the GPU "
           "backend's code path on the CPU kernels, bit-identical to cpu: how CI tests it); "
           "see docs/CUDA.md",
           "cpu cuda device-on-cpu")),
    Ours(V("--memory-cap-per-shard", kStr, "None", kImpl,
           "BYTES (1073741824, 512M, 2GiB = powers of 1024; 3GB = powers of 1000; 0 = no "
           "cap): cap on each rank's activation memory (its training stashes, as 'peak "
           "activation memory' counts them); a rank that exceeds it ends the run with an "
           "out-of-memory error naming the rank and what it tried to allocate")),
    Ours(V("--memory-admission", kStr, "None", kImpl,
           "on (the default; also MXMACA_MEMORY_ADMISSION=on|off) or off: before allocating, "
           "check the start-up memory estimate of the process's ranks (parameters, "
           "gradients, optimizer state, stashed activations; a lower bound) against its "
           "cgroup or physical memory (and the GPU's with --device cuda) and refuse a run "
           "that cannot fit, naming the estimate, the limit and the flags that drive it",
           "on off")),
};

}  // namespace

void AppendSystemGroups(std::vector<FlagSpec>* out) {
  Append(out, "distributed", kDistributed);
  Append(out, "validation", kValidation);
  Append(out, "data and dataloader", kData);
  Append(out, "tokenizer", kTokenizer);
  Append(out, "autoresume", kAutoresume);
  Append(out, "biencoder", kBiencoder);
  Append(out, "vision", kVision);
  Append(out, "moe", kMoe);
  Append(out, "mla", kMla);
  Append(out, "heterogeneous architecture", kHeterogeneous);
  Append(out, "logging", kLogging);
  Append(out, "straggler", kStraggler);
  Append(out, "workload inspector", kWorkloadInspector);
  Append(out, "inference", kInference);
  Append(out, "Transformer-Engine", kTransformerEngine);
  Append(out, "retro", kRetro);
  Append(out, "experimental", kExperimental);
  Append(out, "one logger", kOneLogger);
  Append(out, "In-process restart", kInprocessRestart);
  Append(out, "ft_package", kFtPackage);
  Append(out, "config logger", kConfigLogger);
  Append(out, "rerun engine", kRerunEngine);
  Append(out, "msc", kMsc);
  Append(out, "kitchen", kKitchen);
  Append(out, "sft", kSft);
  Append(out, "mxmaca", kMxmaca);
}

}  // namespace mxmaca::api::flag_rows
