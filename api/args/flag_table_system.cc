// api/args/flag_table_system.cc: rows of the flag table for Megatron's argument
// groups "distributed init" .. "fault injector" (megatron/training/arguments.py at Megatron-LM tag
// core_v0.19.0, as `add_megatron_arguments` builds them, dataclass-generated groups included), in
// parser order, then "kitchen", the flags core_v0.19.0 removed and MXMACA's own flags.
// api/args/testdata/megatron_core_v0.19.0_flags.json is that parser's dump
// (tools/megatron_flags/dump_megatron_flags.py); //api/args:flag_table_pin_test checks
// every row against it.
#include <vector>

#include "api/args/flag_rows.h"

namespace mxmaca::api::flag_rows {
namespace {

constexpr FlagSpec kDistributedInit[] = {
    V("--distributed-backend", kStr, "'nccl'", kNote, kRBackend, "nccl gloo"),
    V("--distributed-timeout-minutes", kInt, "10", kImpl),
    F("--no-align-grad-reduce", "align_grad_reduce", kNote, kRDdp, "--disable-align-grad-reduce"),
    V("--local-rank", kInt, "0", kNote, "MXMACA reads the rank from the launcher's environment"),
    T("--lazy-mpu-init", kUnsup),
    T("--use-megatron-fsdp", kUnsup, "Megatron-FSDP"),
    T("--use-torch-fsdp2", kUnsup, "PyTorch FSDP2"),
    V("--nccl-communicator-config-path", kStr, "None", kNote,
      "NCCL/SHARP tuning; MXMACA picks its transport itself"),
    T("--use-tp-pp-dp-mapping", kUnsup, "MXMACA uses Megatron's default tp-cp-ep-dp-pp order"),
    F("--disable-gloo-process-groups", "use_gloo_process_groups", kNote, kRBackend),
    T("--use-sharp", kNote, "NCCL/SHARP tuning; MXMACA picks its transport itself"),
    V("--sharp-enabled-group", kStr, "None", kNote,
      "NCCL/SHARP tuning; MXMACA picks its transport itself", "dp dp_replica"),
    V("--high-priority-stream-groups", kStr, "[]", kNote, kRKernel, "", "", kPlus),
    V("--distributed-timeout-seconds-after-init", kInt, "None", kNote,
      "MXMACA uses --distributed-timeout-minutes throughout"),
    V("--flight-recorder-dump-path", kStr, "None", kNote, kRPython),
    V("--flight-recorder-trace-buffer-size", kInt, "2000", kNote, kRPython),
    F("--no-flight-recorder-dump-on-timeout", "flight_recorder_dump_on_timeout", kNote, kRPython,
      "--disable-flight-recorder-dump-on-timeout"),
    T("--flight-recorder-include-stack-trace", kNote, kRPython),
    F("--no-flight-recorder-include-only-active", "flight_recorder_include_only_active", kNote,
      kRPython, "--disable-flight-recorder-include-only-active"),
    F("--no-flight-recorder-extra-dump-on-exec", "flight_recorder_extra_dump_on_exec", kNote,
      kRPython, "--disable-flight-recorder-extra-dump-on-exec"),
    T("--disable-jit-fuser", kNote, kRPython),
    V("--decoder-first-pipeline-num-layers", kInt, "None", kImpl),
    V("--decoder-last-pipeline-num-layers", kInt, "None", kImpl),
    V("--pipeline-model-parallel-layout", kStr, "None", kImpl),
    V("--model-parallel-size", kInt, "None", kUnsup, "removed; use --tensor-model-parallel-size"),
    V("--num-layers-per-virtual-pipeline-stage", kInt, "None", kImpl),
    V("--num-virtual-stages-per-pipeline-rank", kInt, "None", kImpl),
    F("--no-overlap-p2p-communication", "overlap_p2p_comm", kNote, kRSchedule),
    T("--overlap-grad-reduce", kImpl),
    V("--ddp-num-buckets", kInt, "None", kNote, kRDdp),
    V("--ddp-bucket-size", kInt, "None", kImpl),
    T("--ddp-pad-buckets-for-high-nccl-busbw", kNote, kRDdp),
    T("--ddp-reduce-scatter-with-fp32-accumulation", kNote, kRDdp),
    V("--ddp-param-name-patterns-for-fp32-local-accumulation", kStr, "[]", kNote, kRDdp, "", "",
      kPlus),
    T("--ddp-average-in-collective", kNote, kRDdp),
    T("--overlap-param-gather", kImpl),
    T("--overlap-param-gather-with-optimizer-step", kNote, kRDdp),
    F("--no-align-param-gather", "align_param_gather", kNote, kRDdp),
    T("--use-distributed-optimizer", kImpl),
    F("--no-use-layer-wise-param-layout", "use_layer_wise_param_layout", kNote, kRDdp),
    T("--use-nccl-ub", kNote, "NCCL/SHARP tuning; MXMACA picks its transport itself", "nccl_ub"),
    T("--disable-symmetric-registration", kNote,
      "NCCL/SHARP tuning; MXMACA picks its transport itself"),
    T("--fsdp-manual-registration", kNote, kRFsdp),
    T("--create-all-gather-group", kNote, kRDdp),
    V("--data-parallel-sharding-strategy", kStr, "'optim_grads_params'", kNote, kRFsdp,
      "no_shard optim optim_grads optim_grads_params"),
    V("--outer-dp-sharding-strategy", kStr, "'no_shard'", kNote, kRFsdp, "no_shard optim"),
    F("--no-gradient-reduce-div-fusion", "gradient_reduce_div_fusion", kNote, kRKernel),
    T("--fsdp-double-buffer", kNote, kRFsdp),
    V("--suggested-communication-unit-size", kInt, "None", kNote, kRFsdp),
    T("--keep-fp8-transpose-cache", kNote, kRFsdp),
    T("--enable-full-sharding-in-hsdp", kNote, kRFsdp),
    V("--num-distributed-optimizer-instances", kInt, "1", kUnsup,
      "more than one distributed-optimizer instance"),
    F("--torch-fsdp2-no-reshard-after-forward", "torch_fsdp2_reshard_after_forward", kNote, kRFsdp),
    V("--cp-comm-type", kStr, "['p2p']", kNote,
      "MXMACA's context parallelism is ring (p2p) attention", "", "", kPlus),
    T("--fake-process-group", kUnsup, "runs without communication"),
};

constexpr FlagSpec kValidation[] = {
    V("--eval-iters", kInt, "100", kImpl),
    V("--eval-interval", kInt, "None", kImpl),
    V("--start-eval-at-iter", kInt, "None", kImpl),
    V("--eval-global-batch-size", kInt, "None", kImpl),
    V("--eval-micro-batch-size", kInt, "None", kImpl,
      "only the training --micro-batch-size (another is refused by name)"),
    T("--skip-train", kImpl),
    T("--test-mode", kNote, "Megatron's functional-test hooks"),
    T("--full-validation", kUnsup),
    T("--multiple-validation-sets", kUnsup),
    V("--validation-set-names", kStr, "None", kNote,
      "names the --multiple-validation-sets, which MXMACA does not support", "", "", kPlus),
};

constexpr FlagSpec kDataAndDataloader[] = {
    V("--data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--phase-transition-iterations", kStr, "None", kUnsup, "data phase transitions"),
    V("--split", kStr, "None", kImpl),
    V("--train-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--valid-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--test-data-path", kStr, "None", kImpl, "", "", "", kStar),
    V("--data-args-path", kStr, "None", kUnsup),
    V("--per-split-data-args-path", kStr, "None", kUnsup),
    V("--per-dataset-sequences-path", kStr, "None", kUnsup, "per-dataset sequence files"),
    T("--dataloader-fast-cache-load", kNote, "MXMACA's dataset index cache loads by mmap already"),
    T("--dataloader-defer-npy-index-mmap", kNote,
      "MXMACA's dataset index cache loads by mmap already"),
    V("--data-cache-path", kStr, "None", kImpl),
    F("--no-mmap-bin-files", "mmap_bin_files", kNote, "I/O choice of the dataset reader"),
    T("--mock-data", kImpl),
    V("--seq-length", kInt, "None", kImpl),
    V("--encoder-seq-length", kInt, "None", kUnsup, "T5 encoder-decoder models"),
    V("--decoder-seq-length", kInt, "None", kUnsup, "T5 encoder-decoder models"),
    V("--sample-rate", kFloat, "1.0", kNote, kRNotGpt),
    V("--mask-prob", kFloat, "0.15", kNote, kRNotGpt),
    V("--short-seq-prob", kFloat, "0.1", kNote, kRNotGpt),
    V("--num-workers", kInt, "2", kImpl),
    T("--reset-position-ids", kImpl),
    T("--reset-attention-mask", kImpl),
    T("--dataloader-inter-document-masking", kUnsup, "attention masked at document boundaries"),
    T("--eod-mask-loss", kImpl),
    F("--no-create-attention-mask-in-dataloader", "create_attention_mask_in_dataloader", kImpl),
    V("--num-dataset-builder-threads", kInt, "1", kNote,
      "MXMACA builds dataset indices on one thread"),
    V("--object-storage-cache-path", kStr, "None", kUnsup, "S3/MSC object storage"),
    V("--mid-level-dataset-surplus", kFloat, "0.005", kImpl),
    T("--allow-ambiguous-pad-tokens", kNote, "GPT-2 BPE has no pad token"),
    T("--fim-data", kUnsup, "fill-in-the-middle datasets"),
    V("--fim-rate", kFloat, "0.5", kNote, "tunes --fim-data, which MXMACA does not support"),
    V("--fim-spm-rate", kFloat, "0.5", kNote, "tunes --fim-data, which MXMACA does not support"),
    V("--fim-split-sample", kStr, "None", kNote, "tunes --fim-data, which MXMACA does not support"),
    V("--fim-fragment-rate", kFloat, "None", kNote,
      "tunes --fim-data, which MXMACA does not support"),
    V("--fim-no-prefix", kStr, "None", kNote, "tunes --fim-data, which MXMACA does not support"),
    V("--fim-prefix-token", kStr, "'<fim_prefix>'", kNote,
      "tunes --fim-data, which MXMACA does not support"),
    V("--fim-middle-token", kStr, "'<fim_middle>'", kNote,
      "tunes --fim-data, which MXMACA does not support"),
    V("--fim-suffix-token", kStr, "'<fim_suffix>'", kNote,
      "tunes --fim-data, which MXMACA does not support"),
    V("--fim-pad-token", kStr, "'<fim_pad>'", kNote,
      "tunes --fim-data, which MXMACA does not support"),
    V("--fim-eod-token", kStr, "'<|endoftext|>'", kNote,
      "tunes --fim-data, which MXMACA does not support"),
};

constexpr FlagSpec kTokenizer[] = {
    V("--vocab-size", kInt, "None", kImpl),
    V("--padded-vocab-size", kInt, "None", kImpl),
    F("--no-pad-vocab-size", "pad_vocab_size", kUnsup, "an unpadded vocabulary",
      "--disable-pad-vocab-size"),
    V("--vocab-file", kStr, "None", kImpl),
    V("--merge-file", kStr, "None", kImpl),
    V("--vocab-extra-ids", kInt, "0", kImpl),
    V("--tokenizer-type", kStr, "None", kImpl,
      "pretrain_gpt's default is GPT2BPETokenizer; validation accepts GPT2BPETokenizer, "
      "HuggingFaceTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, "
      "TikTokenizer and NullTokenizer",
      "BertWordPieceLowerCase BertWordPieceCase GPT2BPETokenizer SentencePieceTokenizer "
      "GPTSentencePieceTokenizer HuggingFaceTokenizer Llama2Tokenizer TikTokenizer "
      "MultimodalTokenizer NullTokenizer NullMultimodalTokenizer SFTTokenizer"),
    V("--tokenizer-model", kStr, "None", kImpl),
    V("--tokenizer-metadata", kStr, "None", kUnsup, "", "", "metadata_path"),
    V("--tokenizer-special-tokens", kStr, "None", kImpl, "", "", "special_tokens", kPlus,
      "--tiktoken-special-tokens"),
    V("--tiktoken-pattern", kStr, "None", kImpl, "", "v1 v2"),
    V("--tiktoken-num-special-tokens", kInt, "1000", kImpl),
    T("--tokenizer-sentencepiece-legacy", kUnsup, "SentencePiece's legacy special-token handling"),
    F("--no-tokenizer-sentencepiece-ignore-extra-whitespaces",
      "tokenizer_sentencepiece_ignore_extra_whitespaces", kUnsup,
      "SentencePiece without ignoring extra whitespace",
      "--disable-tokenizer-sentencepiece-ignore-extra-whitespaces"),
    T("--tokenizer-hf-no-use-fast", kNote,
      "MXMACA has one Hugging Face tokenizer implementation (tokenizer.json)"),
    T("--tokenizer-hf-no-include-special-tokens", kUnsup,
      "Hugging Face encoding without special tokens"),
    T("--trust-remote-code", kNote, "MXMACA reads tokenizer.json itself and runs no model code"),
    V("--null-tokenizer-eod-id", kInt, "None", kUnsup,
      "a NullTokenizer eod id other than vocab_size - 1"),
    V("--null-tokenizer-pad-id", kInt, "-1", kNote,
      "MXMACA never pads sequences (no padding id is used)"),
    V("--chat-template", kStr, "None", kNote,
      "chat templates format --sft conversations, which MXMACA does not support"),
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
};

constexpr FlagSpec kMoe[] = {
    V("--num-experts", kInt, "None", kImpl),
    V("--moe-layer-freq", kCustom, "1", kImpl, "an int N or a Python list pattern"),
    T("--moe-use-upcycling", kUnsup),
    V("--moe-router-load-balancing-type", kStr, "'aux_loss'", kImpl, "",
      "aux_loss seq_aux_loss global_aux_loss sinkhorn quantile_balancing none", "", kPlus),
    V("--moe-aux-loss-coeff", kFloat, "0.0", kImpl, "", "", "", kPlus),
    V("--moe-upcycling-granularity", kInt, "1", kNote,
      "tunes an MoE feature MXMACA does not support"),
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
    T("--mla-down-proj-fusion", kNote, kRMla),
};

constexpr FlagSpec kExperimentalAttentionVariant[] = {
    V("--linear-attention-freq", kCustom, "None", kNote,
      "tunes linear attention, which MXMACA does not support"),
};

constexpr FlagSpec kHeterogeneousArchitecture[] = {
    V("--heterogeneous-layers-config-path", kStr, "None", kUnsup),
    V("--heterogeneous-layers-config-encoded-json", kStr, "None", kUnsup),
};

constexpr FlagSpec kLogging[] = {
    V("--log-interval", kInt, "100", kImpl),
    T("--log-params-norm", kImpl,
      "the log line's 'params norm' and the 'params-norm' scalar; one process only"),
    T("--log-throughput", kImpl,
      "the log line always shows throughput; with --log-timers-to-tensorboard also the "
      "'throughput' scalar"),
    T("--log-progress", kNote, kRTiming),
    V("--timing-log-level", kInt, "0", kNote, kRTiming, "0 1 2"),
    V("--timing-log-option", kStr, "'minmax'", kNote, kRTiming, "max minmax all"),
    V("--tensorboard-dir", kStr, "None", kImpl,
      "Megatron's scalars, written on the last rank (docs/TRAINING.md)"),
    V("--tensorboard-log-interval", kInt, "1", kImpl),
    V("--tensorboard-queue-size", kInt, "1000", kImpl,
      "scalars queued before a write; the file is also flushed at every log line and evaluation"),
    T("--log-timers-to-tensorboard", kImpl,
      "'iteration-time' (and 'throughput' with --log-throughput); the --timing-log-level timers "
      "are not measured"),
    F("--no-log-loss-scale-to-tensorboard", "log_loss_scale_to_tensorboard", kImpl, "",
      "--disable-log-loss-scale-to-tensorboard"),
    T("--log-validation-ppl-to-tensorboard", kImpl),
    T("--log-memory-to-tensorboard", kImpl,
      "writes 'mem-peak-activation-bytes' (largest stage stash per log interval); torch's "
      "allocator counters have no counterpart"),
    V("--log-memory-interval", kInt, "None", kNote,
      "MXMACA reports memory in its log line and with --log-memory-to-tensorboard"),
    T("--log-device-memory-used", kNote,
      "MXMACA reports memory in its log line and with --log-memory-to-tensorboard"),
    T("--log-num-zeros-in-grad", kImpl,
      "the log line's 'num zeros' and the 'num-zeros' scalar; one process only"),
    T("--log-max-attention-logit", kUnsup, "max attention logit logging"),
    F("--no-barrier-with-level-1-timing", "barrier_with_L1_time", kNote, kRTiming),
    T("--log-world-size-to-tensorboard", kImpl),
    V("--wandb-project", kStr, "None", kNote, kRWandb),
    V("--wandb-exp-name", kStr, "None", kNote, kRWandb),
    V("--wandb-save-dir", kStr, "None", kNote, kRWandb),
    V("--wandb-entity", kStr, "None", kNote, kRWandb),
    V("--logging-level", kInt, "None", kNote, kRPython),
    T("--log-energy", kNote, "energy counters are not read"),
    V("--moe-routing-trace-path", kStr, "None", kUnsup, "router decision traces"),
    V("--moe-routing-trace-max-training-iters", kInt, "None", kNote,
      "tunes --moe-routing-trace-path, which MXMACA does not support"),
    T("--moe-routing-trace-capture-logits", kNote,
      "tunes --moe-routing-trace-path, which MXMACA does not support"),
    T("--moe-routing-trace-capture-hidden-states", kNote,
      "tunes --moe-routing-trace-path, which MXMACA does not support"),
    T("--moe-routing-trace-dump-weights", kNote,
      "tunes --moe-routing-trace-path, which MXMACA does not support"),
};

constexpr FlagSpec kLogitsDistillation[] = {
    V("--logits-save-top-k", kInt, "None", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-save-top-p", kFloat, "None", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-save-top-p-min-k", kInt, "1", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-save-dir", kStr, "None", kUnsup, "saving logits for distillation"),
    V("--logits-save-dtype", kStr, "'fp16'", kNote,
      "tunes logits distillation, which MXMACA does not support", "fp16 bf16 fp32"),
    V("--logits-load-dir", kStr, "None", kUnsup, "logits distillation"),
    V("--logits-load-decode-threads", kInt, "4", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-load-prefetch-factor", kInt, "3", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-load-msc-prefetch-depth", kInt, "2", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    V("--logits-load-kd-loss-alpha", kFloat, "1.0", kNote,
      "tunes logits distillation, which MXMACA does not support"),
    T("--logits-load-ignore-errors", kNote,
      "tunes logits distillation, which MXMACA does not support"),
};

constexpr FlagSpec kStraggler[] = {
    T("--log-straggler", kNote, kRStraggler),
    V("--straggler-ctrlr-port", kInt, "65535", kNote, kRStraggler),
    V("--straggler-minmax-count", kInt, "1", kNote, kRStraggler),
    T("--disable-straggler-on-startup", kNote, kRStraggler),
};

constexpr FlagSpec kWorkloadInspector[] = {
    T("--run-workload-inspector-server", kNote, kRNvInternal),
};

constexpr FlagSpec kInference[] = {
    V("--inference-batch-times-seqlen-threshold", kInt, "-1", kNote, kRInference),
    V("--max-tokens-to-oom", kInt, "12000", kNote, kRInference),
    T("--output-bert-embeddings", kNote, kRInference),
    V("--bert-embedder-type", kStr, "'megatron'", kNote, kRInference, "megatron huggingface"),
    V("--cuda-graph-scope", kCustom, "None", kImpl, "", "", "cuda_graph_scope_deprecated", kPlus),
    V("--cuda-graph-modules", kCustom, "[]", kNote, kRCudaGraph, "", "", kPlus),
    T("--use-legacy-static-engine", kNote, kRInference),
    V("--inference-max-requests", kInt, "8", kNote, kRInference),
    V("--inference-max-seq-length", kInt, "2560", kNote, kRInference),
    T("--inference-dynamic-batching", kNote, kRInference),
    V("--inference-dynamic-batching-buffer-size-gb", kFloat, "40.0", kNote, kRInference),
    V("--inference-dynamic-batching-paused-buffer-size-gb", kFloat, "None", kNote, kRInference),
    V("--inference-dynamic-batching-mamba-memory-ratio", kFloat, "None", kNote, kRInference),
    V("--inference-dynamic-batching-block-size", kInt, "256", kNote, kRInference),
    V("--inference-dynamic-batching-max-requests", kInt, "None", kNote, kRInference),
    V("--inference-dynamic-batching-max-tokens", kInt, "None", kNote, kRInference),
    V("--inference-dynamic-batching-num-cuda-graphs", kInt, "16", kNote, kRInference),
    T("--inference-dynamic-batching-track-paused-request-events", kNote, kRInference),
    T("--inference-dynamic-batching-track-generated-token-events", kNote, kRInference),
    T("--decode-only-cuda-graphs", kNote, kRInference),
    T("--inference-cuda-graph-all-prefills", kNote, kRInference),
    V("--inference-cuda-graph-max-tokens", kInt, "512", kNote, kRInference),
    V("--inference-dynamic-batching-unified-memory-level", kInt, "0", kNote, kRInference, "0 1"),
    T("--enable-chunked-prefill", kNote, kRInference),
    V("--num-speculative-tokens", kInt, "0", kNote, kRInference),
    B("--inference-dynamic-batching-prefix-caching", kNote, kRInference, "False",
      "inference_dynamic_batching_enable_prefix_caching"),
    V("--inference-dynamic-batching-prefix-caching-eviction-policy", kStr, "'ref_zero'", kNote,
      kRInference, "ref_zero lru"),
    V("--inference-dynamic-batching-prefix-caching-coordinator-policy", kStr, "'load_balanced'",
      kNote, kRInference, "longest_prefix first_prefix_block load_balanced"),
    V("--inference-dynamic-batching-prefix-caching-routing-alpha", kFloat, "0.5", kNote,
      kRInference),
    V("--inference-dynamic-batching-prefix-caching-mamba-gb", kFloat, "None", kNote, kRInference),
    V("--inference-dynamic-batching-cuda-graph-mixed-prefill-count", kInt, "16", kNote,
      kRInference),
    V("--inference-dynamic-batching-cuda-graph-sizing-distribution", kStr, "'exponential'", kNote,
      kRInference, "exponential linear"),
    V("--inference-dynamic-batching-sampling-backend", kStr, "'torch'", kNote, kRInference,
      "torch flashinfer"),
    F("--use-same-sampling-seed-across-dp-ranks", "offset_sampling_seed_by_dp_rank", kNote,
      kRInference),
    V("--inference-dynamic-batching-async-sched-mode", kStr, "'legacy'", kNote, kRInference,
      "legacy async"),
    V("--inference-dynamic-batching-logprobs-mode", kStr, "'raw_logprobs'", kNote, kRInference,
      "raw_logprobs processed_logprobs"),
    V("--inference-logging-step-interval", kInt, "0", kNote, kRInference),
    B("--inference-text-gen-server-logging", kNote, kRInference),
    B("--inference-wandb-logging", kNote, kRInference),
    V("--inference-coordinator-port", kInt, "None", kNote, kRInference),
    V("--mamba-inference-conv-states-dtype", kStr, "'bf16'", kNote, kRMamba, "bf16 fp16 fp32"),
    V("--mamba-inference-ssm-states-dtype", kStr, "'bf16'", kNote, kRMamba, "bf16 fp16 fp32"),
    B("--inference-use-synchronous-zmq-collectives", kNote, kRInference),
    B("--inference-disable-ep-consensus", kNote, kRInference),
    V("--inference-shards", kStr, "None", kNote, kRInference),
};

constexpr FlagSpec kTransformerEngine[] = {
    T("--fp4-param-gather", kNote, kRFp8),
    T("--fp8-param-gather", kNote, kRFp8),
    V("--te-precision-config-file", kStr, "None", kNote, kRTe),
};

constexpr FlagSpec kExperimental[] = {
    T("--enable-experimental", kNote, "Megatron's experimental code paths"),
    V("--spec", kStr, "None", kUnsup, "custom module specs", "", "", kStar),
    V("--hybrid-layer-pattern", kStr, "None", kUnsup, "Mamba/hybrid models"),
    V("--hybrid-override-pattern", kStr, "None", kNote, kRMamba),
    V("--yaml-cfg", kStr, "None", kUnsup, "YAML configs"),
    T("--use-precision-aware-optimizer", kImpl, "required by --optimizer-cpu-offload; fp32 states"),
    V("--main-grads-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 bf16"),
    V("--main-params-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16"),
    V("--exp-avg-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16 bf16 fp8"),
    V("--exp-avg-sq-dtype", kStr, "'fp32'", kNote, kRPrecisionOpt, "fp32 fp16 bf16 fp8"),
    V("--megatron-fsdp-main-params-dtype", kStr, "'fp32'", kNote, kRFsdp, "fp32 bf16 fp16 auto"),
    V("--megatron-fsdp-main-grads-dtype", kStr, "'auto'", kNote, kRFsdp, "fp32 bf16 fp16 auto"),
    V("--megatron-fsdp-grad-comm-dtype", kStr, "'auto'", kNote, kRFsdp, "fp32 fp16 bf16 auto"),
    T("--megatron-fsdp-enable-fine-grained-param-gather", kNote, kRFsdp),
    T("--megatron-fsdp-max-pool-double-buffer", kNote, kRFsdp),
    T("--fsdp-db-use-persist-buf-on-alloc-fail", kNote, kRFsdp),
};

constexpr FlagSpec kOneLogger[] = {
    F("--no-one-logger", "enable_one_logger", kNote, kRNvInternal),
    V("--one-logger-project", kStr, "'megatron-lm'", kNote, kRNvInternal),
    V("--one-logger-run-name", kStr, "None", kNote, kRNvInternal),
    T("--one-logger-async", kNote, kRNvInternal),
    V("--app-tag-run-name", kStr, "None", kNote, kRNvInternal),
    V("--app-tag-run-version", kStr, "'0.0.0'", kNote, kRNvInternal),
};

constexpr FlagSpec kInProcessRestart[] = {
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
    V("--inprocess-active-world-size", kInt, "1", kNote, kRInproc),
    T("--inprocess-empty-cuda-cache", kNote, kRInproc),
};

constexpr FlagSpec kFtPackage[] = {
    T("--enable-ft-package", kNote, kRNvInternal),
    T("--calc-ft-timeouts", kNote, kRNvInternal),
    V("--ft-num-warmup-iters", kInt, "5", kNote,
      "tunes NVIDIA's fault-tolerance package, which MXMACA does not use"),
};

constexpr FlagSpec kRerunEngine[] = {
    V("--error-injection-rate", kInt, "0", kNote, kRRerun),
    V("--error-injection-type", kStr, "'transient_error'", kNote, kRRerun,
      "correct_result transient_error persistent_error"),
    V("--rerun-mode", kStr, "'validate_results'", kNote, kRRerun,
      "disabled validate_results report_stats"),
    T("--check-for-spiky-loss", kNote, kRRerun),
};

constexpr FlagSpec kMsc[] = {
    T("--enable-msc", kNote, "Multi-Storage Client is not used"),
    T("--disable-msc", kNote, "Multi-Storage Client is not used", "disable_msc_deprecated"),
};

constexpr FlagSpec kSft[] = {
    T("--sft", kUnsup, "supervised fine-tuning datasets"),
    V("--sft-tokenizer-prompt-format", kStr, "'nemotron-h-aligned'", kNote,
      "tunes --sft, which MXMACA does not support"),
};

constexpr FlagSpec kFaultInjector[] = {
    V("--fault-injector-ranks", kStr, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-num-ranks", kInt, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-fault-types", kStr, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-fault-probabilities", kStr, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-fault-delay", kFloat, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-delay-start-iteration", kInt, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-mtti-seconds", kFloat, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-offset-seconds", kFloat, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
    V("--fault-injector-seed", kInt, "None", kUnsup,
      "Megatron's fault injector (MXMACA's fault tests: tests/bench/fault_soak.sh)"),
};

// Only added by Megatron when NVIDIA's Kitchen library is importable (not in the dump).
constexpr FlagSpec kKitchen[] = {
    V("--kitchen-config-file", kStr, "None", kUnsup, "Kitchen quantization"),
    V("--kitchen-recipe-number", kInt, "None", kUnsup, "Kitchen quantization"),
};

// Added by pretrain_gpt.py (extra_args_provider=add_modelopt_args,
// megatron/post_training/arguments.py) only when NVIDIA Model Optimizer is installed.
constexpr FlagSpec kModelopt[] = {
    V("--export-model-type", kStr, "'GPTModel'", kNote, kRModelopt,
      "GPTModel HybridModel MambaModel"),
    T("--export-legacy-megatron", kNote, kRModelopt),
    T("--export-te-mcore-model", kNote, kRModelopt),
    T("--export-default-te-spec", kNote, kRModelopt),
    T("--export-force-local-attention", kNote, kRModelopt),
    V("--export-kv-cache-quant", kStr, "'none'", kNote, kRModelopt,
      "none fp8 fp8_affine nvfp4 nvfp4_affine nvfp4_rotate"),
    V("--export-real-quant-cfg", kStr, "'None'", kUnsup, "quantization (NVIDIA Model Optimizer)",
      "fp8_real_quant fp8_blockwise_real_quant None"),
    V("--export-quant-cfg", kStr, "None", kUnsup, "quantization (NVIDIA Model Optimizer)"),
    V("--export-kd-teacher-load", kStr, "None", kUnsup,
      "knowledge distillation (NVIDIA Model Optimizer)"),
    V("--export-kd-teacher-model-config", kStr, "None", kNote, kRModelopt),
    V("--export-kd-teacher-ckpt-format", kStr, "None", kNote, kRModelopt,
      "torch torch_dist torch_dcp"),
    V("--export-kd-cfg", kStr, "None", kNote, kRModelopt),
    V("--finetune-hf-dataset", kStr, "None", kUnsup,
      "Hugging Face fine-tuning datasets (NVIDIA Model Optimizer)"),
    V("--finetune-data-split", kStr, "'train'", kNote, kRModelopt),
    V("--qad-train-target", kStr, "None", kUnsup,
      "quantization-aware distillation (NVIDIA Model Optimizer)", "base mtp both"),
    T("--freeze-base-for-mtp", kUnsup, "multi-token prediction"),
    T("--export-qk-l2-norm", kNote, kRModelopt),
    T("--export-moe-apply-probs-on-input", kNote, kRModelopt),
    T("--export-offline-model", kNote, kRModelopt),
    T("--modelopt-enabled", kUnsup, "NVIDIA Model Optimizer"),
    T("--enable-gpt-oss", kUnsup, "GPT-OSS models (sliding-window attention, learnable softmax)"),
};

// Flags of Megatron-LM before core_v0.19.0 (commit 000c4ac, and two switches removed in
// July 2024 by commit 07659f9) that core_v0.19.0 no longer defines; accepted as before so
// that older scripts run unchanged.
constexpr FlagSpec kRemoved[] = {
    // Megatron's "regularization" group.
    Removed(T("--muon-use-nesterov", kNote, kRMuon)),
    // Megatron's "training" group.
    Removed(F("--no-async-tensor-model-parallel-allreduce", "async_tensor_model_parallel_allreduce",
              kNote, kRDeprecated)),
    Removed(T("--use-legacy-models", kUnsup, "MXMACA implements Megatron-Core's GPT")),
    // Megatron's "rl" group.
    Removed(V("--grpo-default-temperature", kFloat, "1.0", kNote, kRRl)),
    Removed(V("--grpo-default-top-p", kFloat, "0", kNote, kRRl)),
    Removed(V("--langrl-inference-server-type", kStr, "'inplace_megatron'", kNote, kRRl,
              "inplace_megatron inplace_megatron_chat")),
    Removed(V("--langrl-inference-server-conversation-template", kStr, "None", kNote, kRRl)),
    Removed(B("--langrl-external-server", kNote, kRRl)),
    Removed(B("--rl-offload-kv-cache-during-training", kNote, kRRl)),
    Removed(B("--rl-remove-kv-cache-during-training", kNote, kRRl)),
    Removed(B("--rl-reset-cuda-graphs", kNote, kRRl)),
    Removed(B("--rl-calculate-intra-group-similarity", kNote, kRRl)),
    Removed(V("--rl-sequence-packing-bin-size", kInt, "8192", kNote, kRRl)),
    // Megatron's "distributed" group.
    Removed(F("--no-scatter-gather-tensors-in-pipeline", "scatter_gather_tensors_in_pipeline",
              kNote, kRSchedule)),
    // Megatron's "data and dataloader" group.
    Removed(V("--retriever-seq-length", kInt, "256", kNote, kRNotGpt)),
    // Megatron's "tokenizer" group.
    Removed(T("--legacy-tokenizer", kImpl)),
    // Megatron's "moe" group.
    Removed(T("--moe-use-legacy-grouped-gemm", kNote, kRKernel)),
    Removed(T("--moe-extended-tp", kUnsup, "removed; use --expert-tensor-parallel-size")),
    // Megatron's "logging" group.
    Removed(
        T("--log-batch-size-to-tensorboard", kNote,
          "Megatron before 07659f9 (2024); 'batch-size' is always written, as Megatron does now")),
    Removed(F("--no-log-learnig-rate-to-tensorboard", "log_learning_rate_to_tensorboard", kImpl,
              "Megatron before 07659f9 (2024), its spelling; no 'learning-rate' scalars",
              "--no-log-learning-rate-to-tensorboard")),
    // Megatron's "inference" group.
    Removed(V("--inference-max-batch-size", kInt, "None", kNote, kRInference)),
    Removed(V("--inference-dynamic-batching-buffer-guaranteed-fraction", kFloat, "0.2", kNote,
              kRInference)),
    Removed(V("--inference-dynamic-batching-buffer-overflow-factor", kFloat, "None", kNote,
              kRInference)),
    Removed(
        V("--inference-dynamic-batching-max-requests-override", kInt, "None", kNote, kRInference)),
    Removed(
        V("--inference-dynamic-batching-max-tokens-override", kInt, "None", kNote, kRInference)),
    Removed(T("--disable-chunked-prefill", kNote, kRInference)),
    Removed(V("--inference-wandb-logging-step-interval", kInt, "0", kNote, kRInference)),
    // Megatron's "retro" group.
    Removed(V("--retro-project-dir", kStr, "None", kUnsup, "Retro")),
    Removed(T("--retro-add-retriever", kUnsup, "Retro")),
    Removed(V("--retro-cyclic-train-iters", kInt, "None", kNote, kRRetro)),
    Removed(V("--retro-encoder-layers", kInt, "2", kNote, kRRetro)),
    Removed(V("--retro-encoder-hidden-dropout", kFloat, "0.1", kNote, kRRetro)),
    Removed(V("--retro-encoder-attention-dropout", kFloat, "0.1", kNote, kRRetro)),
    Removed(V("--retro-num-neighbors", kInt, "2", kNote, kRRetro)),
    Removed(V("--retro-num-retrieved-chunks", kInt, "2", kNote, kRRetro)),
    Removed(V("--retro-attention-gate", kFloat, "1", kNote, kRRetro)),
    Removed(F("--retro-no-verify-neighbor-count", "retro_verify_neighbor_count", kNote, kRRetro)),
    // Megatron's "experimental" group.
    Removed(V("--hybrid-attention-ratio", kFloat, "0.0", kNote, kRMamba)),
    Removed(V("--hybrid-mlp-ratio", kFloat, "0.0", kNote, kRMamba)),
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
           "cuda (the GPU backend: each stage actor's model on its own CUDA stream with "
           "device-resident "
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
  Append(out, "distributed init", kDistributedInit);
  Append(out, "validation", kValidation);
  Append(out, "data and dataloader", kDataAndDataloader);
  Append(out, "tokenizer", kTokenizer);
  Append(out, "autoresume", kAutoresume);
  Append(out, "biencoder", kBiencoder);
  Append(out, "vision", kVision);
  Append(out, "moe", kMoe);
  Append(out, "mla", kMla);
  Append(out, "experimental_attention_variant", kExperimentalAttentionVariant);
  Append(out, "heterogeneous architecture", kHeterogeneousArchitecture);
  Append(out, "logging", kLogging);
  Append(out, "Logits Distillation", kLogitsDistillation);
  Append(out, "straggler", kStraggler);
  Append(out, "workload inspector", kWorkloadInspector);
  Append(out, "inference", kInference);
  Append(out, "Transformer-Engine", kTransformerEngine);
  Append(out, "experimental", kExperimental);
  Append(out, "one logger", kOneLogger);
  Append(out, "In-process restart", kInProcessRestart);
  Append(out, "ft_package", kFtPackage);
  Append(out, "rerun engine", kRerunEngine);
  Append(out, "msc", kMsc);
  Append(out, "sft", kSft);
  Append(out, "fault injector", kFaultInjector);
  Append(out, "kitchen", kKitchen);
  Append(out, "modelopt-generic", kModelopt);
  Append(out, "removed in Megatron-Core 0.19", kRemoved);
  Append(out, "mxmaca", kMxmaca);
}

}  // namespace mxmaca::api::flag_rows
