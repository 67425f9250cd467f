// Runs gpt-3-encoder@1.1.4's Encoder.js (a JavaScript port of openai/gpt-2's
// encoder.py) as the second reference for //data:gpt2_bpe_tokenizer_parity_test.
// Usage: node node_encode.js ENCODER_JS_DIR < strings.jsonl > ids.jsonl
const path = require('path');
const readline = require('readline');
const { encode } = require(path.join(process.argv[2], 'Encoder.js'));

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on('line', (line) => { out.push(JSON.stringify(encode(JSON.parse(line)))); });
rl.on('close', () => { process.stdout.write(out.join('\n') + (out.length ? '\n' : '')); });
