// Prints node's classes for the three regex classes GPT-2's pattern uses, as
// "first last class" lines (hex; 1 = \p{L}, 2 = \p{N}, 3 = \s), the format of
// `tokenize_tool --dump-classes`. node's Unicode version (process.versions.unicode)
// is newer than Python `regex`'s, and JavaScript's \s differs from Unicode
// White_Space (it has U+FEFF, lacks U+0085), so the parity test compares node only
// on strings whose characters both classify alike.
const L = /^\p{L}$/u, N = /^\p{N}$/u, S = /^\s$/u;
const lines = [`# node ${process.versions.node} unicode ${process.versions.unicode}`];
let start = 0, current = -1;
for (let cp = 0; cp <= 0x110000; ++cp) {
  let c = -1;
  if (cp < 0x110000) {
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      c = 0;
    } else {
      const ch = String.fromCodePoint(cp);
      c = L.test(ch) ? 1 : N.test(ch) ? 2 : S.test(ch) ? 3 : 0;
    }
  }
  if (c !== current) {
    if (current > 0) lines.push(`${start.toString(16).toUpperCase()} ${(cp - 1).toString(16).toUpperCase()} ${current}`);
    start = cp;
    current = c;
  }
}
process.stdout.write(lines.join('\n') + '\n');
