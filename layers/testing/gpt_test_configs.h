// layers/testing/gpt_test_configs.h (testonly): the tiny GPT configurations the tests share,
// so that a test says which architecture and sizes it uses in one line instead of a dozen
// field assignments. Sizes are counts; every other field keeps GptConfig's defaults
// (Megatron's: dropout 0.1, seed 1234, LayerNorm eps 1e-5, ...) unless a function sets it.
#ifndef MXMACA_LAYERS_TESTING_GPT_TEST_CONFIGS_H_
#define MXMACA_LAYERS_TESTING_GPT_TEST_CONFIGS_H_

#include <cstdint>

#include "layers/gpt_config.h"

namespace mxmaca::layers::testing {

// GptSizes: the sizes of a test GPT, in this order: L layers, h hidden, f ffn hidden, np
// attention heads, s sequence length, max position embeddings, V real vocabulary, V_pad
// padded vocabulary (V <= V_pad).
struct GptSizes {
  int64_t num_layers;
  int64_t hidden_size;
  int64_t ffn_hidden_size;
  int64_t num_attention_heads;
  int64_t seq_length;
  int64_t max_position_embeddings;
  int64_t vocab_size;
  int64_t padded_vocab_size;
};

// Gpt2StyleConfig: Megatron's default (GPT-2) architecture at `sizes`: LayerNorm, exact-GELU
// MLP with biases, learned absolute position embeddings, output layer tied to the word
// embeddings, multi-head attention. The overload with `seed` also sets --seed; the one with
// `dropout` sets --hidden-dropout and --attention-dropout to it.
GptConfig Gpt2StyleConfig(const GptSizes& sizes);
GptConfig Gpt2StyleConfig(const GptSizes& sizes, uint64_t seed);
GptConfig Gpt2StyleConfig(const GptSizes& sizes, uint64_t seed, float dropout);

// LlamaStyle: `c` turned into the Llama architecture (Megatron's Llama scripts:
// --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
// --untie-embeddings-and-output-weights); sizes, GQA, dropout and seed stay as in `c`.
GptConfig LlamaStyle(GptConfig c);

// TinyGptConfig: the 3-layer GPT-2-style stage-test config (h 32, f 48, np 4, s 12, max
// positions 16, V 90 of V_pad 96, dropout 0.1, seed 77) that GptStage's and the device
// stage's tests both use, so the two compare the same model.
GptConfig TinyGptConfig();

// TinyLlamaConfig: TinyGptConfig in LlamaStyle with GQA (2 query groups).
GptConfig TinyLlamaConfig();

}  // namespace mxmaca::layers::testing

#endif  // MXMACA_LAYERS_TESTING_GPT_TEST_CONFIGS_H_
