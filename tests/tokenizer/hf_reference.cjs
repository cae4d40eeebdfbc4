// Reference side of the tokenizer tests and benchmark: runs Hugging Face `tokenizers` (npm) and
// `@huggingface/jinja` on inputs written by the C++ side and writes JSON results back.
//
//   node hf_reference.cjs NODE_MODULES encode TOKENIZER_JSON IN.json OUT.json [add_special]
//   node hf_reference.cjs NODE_MODULES decode TOKENIZER_JSON IN.json OUT.json [skip_special]
//   node hf_reference.cjs NODE_MODULES bench  TOKENIZER_JSON IN.json OUT.json
//   node hf_reference.cjs NODE_MODULES jinja  TOKENIZER_CONFIG IN.json OUT.json
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeModules, mode, file, inPath, outPath, flag] = process.argv.slice(2);
const input = JSON.parse(fs.readFileSync(inPath, 'utf8'));

async function main() {
  if (mode === 'jinja') {
    const { Template } = require(path.join(nodeModules, '@huggingface/jinja'));
    const config = JSON.parse(fs.readFileSync(file, 'utf8'));
    const tokenOf = (v) => (v && typeof v === 'object' ? v.content : v);
    const template = new Template(config.chat_template);
    const out = input.map((c) =>
      template.render({
        messages: c.messages,
        add_generation_prompt: c.add_generation_prompt,
        bos_token: tokenOf(config.bos_token),
        eos_token: tokenOf(config.eos_token),
      }),
    );
    fs.writeFileSync(outPath, JSON.stringify(out));
    return;
  }
  const { Tokenizer } = require(path.join(nodeModules, 'tokenizers'));
  const tok = Tokenizer.fromString(fs.readFileSync(file, 'utf8'));
  if (mode === 'encode') {
    const opts = { addSpecialTokens: flag === '1' };
    const out = [];
    for (const text of input) out.push((await tok.encode(text, null, opts)).getIds());
    fs.writeFileSync(outPath, JSON.stringify(out));
  } else if (mode === 'decode') {
    const out = [];
    for (const ids of input) out.push(await tok.decode(ids, flag === '1'));
    fs.writeFileSync(outPath, JSON.stringify(out));
  } else if (mode === 'bench') {
    // Single-call throughput: documents one at a time, then the whole corpus as one string.
    // Time is process CPU time (all threads: encode runs on a libuv worker), so a busy machine
    // does not distort the per-core figure.
    const cpu = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    };
    const opts = { addSpecialTokens: false };
    const bytes = input.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
    for (const s of input.slice(0, 20)) await tok.encode(s, null, opts);  // warm up
    const result = { bytes };
    let best = Infinity, tokens = 0;
    for (let r = 0; r < 3; ++r) {
      const t0 = cpu();
      tokens = 0;
      for (const s of input) tokens += (await tok.encode(s, null, opts)).getLength();
      best = Math.min(best, cpu() - t0);
    }
    result.per_doc_seconds = best;
    result.tokens = tokens;
    const whole = input.join('\n');
    best = Infinity;
    for (let r = 0; r < 3; ++r) {
      const t0 = cpu();
      await tok.encode(whole, null, opts);
      best = Math.min(best, cpu() - t0);
    }
    result.whole_seconds = best;
    result.whole_bytes = Buffer.byteLength(whole, 'utf8');
    fs.writeFileSync(outPath, JSON.stringify(result));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
