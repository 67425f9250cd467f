// layers/testing/gpt_test_configs.cc: see gpt_test_configs.h.
#include "layers/testing/gpt_test_configs.h"

namespace mxmaca::layers::testing {

GptConfig Gpt2StyleConfig(const GptSizes& sizes) {
  GptConfig c;
  c.num_layers = sizes.num_layers;
  c.hidden_size = sizes.hidden_size;
  c.ffn_hidden_size = sizes.ffn_hidden_size;
  c.num_attention_heads = sizes.num_attention_heads;
  c.seq_length = sizes.seq_length;
  c.max_position_embeddings = sizes.max_position_embeddings;
  c.vocab_size = sizes.vocab_size;
  c.padded_vocab_size = sizes.padded_vocab_size;
  c.position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  c.normalization = Normalization::kLayerNorm;
  c.swiglu = false;
  c.add_bias_linear = true;
  c.untie_embeddings_and_output_weights = false;
  return c;
}

GptConfig Gpt2StyleConfig(const GptSizes& sizes, uint64_t seed) {
  GptConfig c = Gpt2StyleConfig(sizes);
  c.seed = seed;
  return c;
}

GptConfig Gpt2StyleConfig(const GptSizes& sizes, uint64_t seed, float dropout) {
  GptConfig c = Gpt2StyleConfig(sizes, seed);
  c.hidden_dropout = dropout;
  c.attention_dropout = dropout;
  return c;
}

GptConfig LlamaStyle(GptConfig c) {
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  c.add_bias_linear = false;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

GptConfig TinyGptConfig() {
  return Gpt2StyleConfig({3, 32, 48, 4, 12, 16, 90, 96}, /*seed=*/77, /*dropout=*/0.1f);
}

GptConfig TinyLlamaConfig() {
  GptConfig c = LlamaStyle(TinyGptConfig());
  c.num_query_groups = 2;
  return c;
}

}  // namespace mxmaca::layers::testing
