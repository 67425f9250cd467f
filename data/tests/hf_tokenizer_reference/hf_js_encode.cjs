// hf_js_encode.cjs DIR_WITH_TOKENIZER_JSON [core] < strings.jsonl > out.jsonl
// The reference: @huggingface/tokenizers (pure JavaScript, independent of the Rust
// library) from $MXMACA_SHARE/hf-tokenizers-js. Output lines as tokenizer_tool's:
// {"ids": encode(text).ids (with the post-processor's special tokens), "text": decode(ids)}
// (Megatron's --legacy-tokenizer); with "core": encode without special tokens and decode
// skipping them (megatron/core/tokenizers' HuggingFaceTokenizer).
const fs = require("fs");
const path = require("path");
const share = process.env.MXMACA_SHARE || "/usr/local/share/mxmaca";
const { Tokenizer } = require(path.join(share, "hf-tokenizers-js/dist/tokenizers.cjs"));
const dir = process.argv[2];
const core = process.argv[3] === "core";
const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const cfgPath = path.join(dir, "tokenizer_config.json");
const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const tok = new Tokenizer(tj, cfg);
const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const text = JSON.parse(line);
  const ids = tok.encode(text, { add_special_tokens: !core }).ids;
  out.push(JSON.stringify({ ids: ids, text: ids.length ? tok.decode(ids, { skip_special_tokens: core }) : "" }));
}
process.stdout.write(out.join("\n") + "\n");
