// js_tiktoken_encode.cjs VOCAB.json v1|v2 NUM_SPECIAL_TOKENS VOCAB_SIZE [SPECIALS] < strings.jsonl
// The reference: js-tiktoken@1.0.21 (pure JavaScript tiktoken) from
// $MXMACA_SHARE/js-tiktoken, set up as Megatron's CustomTikTokenizer: the first
// VOCAB_SIZE - NUM_SPECIAL_TOKENS ranks, ids shifted by NUM_SPECIAL_TOKENS,
// encode_ordinary (--legacy-tokenizer). With SPECIALS (comma-separated list, padded with
// <SPECIAL_i> to NUM_SPECIAL_TOKENS) as megatron/core/tokenizers' TikTokenTokenizer:
// those are ids 0..K-1 and encode(text, allowed_special="all"). Megatron's v1 pattern uses possessive quantifiers that JavaScript
// lacks; here `?+` and `++` become `?` and `+`, which match the same strings in this
// pattern (the possessive parts are followed by classes they cannot overlap).
// Output lines: {"ids": [...], "text": decode(ids)}.
const fs = require("fs");
const path = require("path");
const share = process.env.MXMACA_SHARE || "/usr/local/share/mxmaca";
const { Tiktoken } = require(path.join(share, "js-tiktoken/dist/lite.cjs"));
const [vocabPath, which, kStr, nStr, specialsArg] = process.argv.slice(2);
const K = Number(kStr), N = Number(nStr);
const V1 = String.raw`[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`;
const V2 = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const pat = which === "v1" ? V1.replace(/\?\+/g, "?").replace(/\+\+/g, "+") : V2;
const vocab = JSON.parse(fs.readFileSync(vocabPath, "utf8")).slice(0, N - K);
const specials = {};
if (specialsArg) {
  const list = specialsArg.split(",");
  for (let i = list.length; i < K; i++) list.push(`<SPECIAL_${i}>`);
  list.forEach((t, i) => { specials[t] = i - K; });  // shifted by +K below
}
const enc = new Tiktoken({
  pat_str: pat,
  special_tokens: specials,
  bpe_ranks: "! 0 " + vocab.map((x) => x.token_bytes).join(" "),
});
const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const ids = enc.encode(JSON.parse(line), specialsArg ? "all" : []).map((t) => t + K);
  out.push(JSON.stringify({ ids: ids, text: enc.decode(ids.map((t) => t - K)) }));
}
process.stdout.write(out.join("\n") + "\n");
