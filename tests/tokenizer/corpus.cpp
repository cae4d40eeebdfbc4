#include "corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace fs = std::filesystem;
namespace {

std::string read(const fs::path& p, size_t limit) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > limit) {
    s.resize(limit);
    s.resize(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
  }
  return s;
}

// Splits at line ends into documents of at most `max` bytes (a longer line is its own doc).
void add_chunks(const std::string& text, std::vector<std::string>& docs, size_t max = 4000) {
  std::string cur;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    if (!cur.empty() && cur.size() + (end - pos) > max) {
      docs.push_back(std::move(cur));
      cur.clear();
    }
    cur.append(text, pos, end - pos);
    pos = end;
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
}

void s_append(std::string& s, char sep, char32_t c) {
  s += sep;
  utf8_append(s, c);
}

std::string cp(char32_t c) {
  std::string s;
  utf8_append(s, c);
  return s;
}

}  // namespace

std::vector<std::string> edge_case_docs() {
  std::vector<std::string> d;
  std::string digits;
  for (int n = 1; n <= 40; ++n) {
    for (int i = 0; i < n; ++i) digits += static_cast<char>('0' + (i * 7 + n) % 10);
    digits += n % 3 ? " " : "\n";
  }
  d.push_back(digits);
  d.push_back(
      "x1y22z333w4444v55555 a1b2c3 007 1.2.3.4 -42 +17 3/4 99% $1,234.56 2024-01-31T23:59:59Z");
  std::string ws;
  for (int n = 1; n <= 24; ++n) {
    ws += 'w';
    ws.append(n, ' ');
    ws += 'x';
    ws.append(n % 5, '\t');
  }
  d.push_back(ws);
  d.push_back("  leading spaces\ttab\t\ttabs \t mixed\t \n  \n\n\n   trailing   ");
  d.push_back("line1\r\nline2\r\n\r\nline3\rline4\n\rline5 \r\n \r\n\t\r\n");
  d.push_back(std::string(300, ' ') + "after many spaces" + std::string(50, '\n') + "end");
  d.push_back(std::string(200, 'a') + " " + std::string(150, '9') + " " + std::string(90, '-') +
              std::string(64, '=') + " " + std::string(40, '!'));
  d.push_back("\xE2\x80\xA8line separator\xE2\x80\xA9paragraph separator\xC2\x85next line " +
              cp(0x85) + cp(0x85) + " x " + cp(0xA0) + cp(0x3000) + cp(0x2009) + "thin" +
              cp(0x200B) + "zwsp" + cp(0xFEFF) + "bom" + cp(0x200D) + "zwj" + cp(0x1680));
  std::string controls;
  for (int c = 1; c < 32; ++c) {
    controls += 'c';
    controls += static_cast<char>(c);
  }
  controls += std::string("nul:") + '\0' + "end del:\x7F";
  d.push_back(controls);
  d.push_back(
      "👨‍👩‍👧‍👦👨‍👩‍👧‍👦 family 👩‍❤️‍💋‍👨 kiss "
      "🧑🏽‍🚀 "
      "astronaut "
      "🏳️‍⚧️ 🇦🇶🇦🇶🇦 odd flags 🇺🇳🇪🇺 "
      "keycaps 0️⃣1️⃣2️⃣ *️⃣ skin 👋🏻👋🏼👋🏽👋🏾👋🏿 ☝🏿 "
      "text-vs-emoji "
      "☺︎ "
      "☺️ "
      "✌︎ "
      "✌️");
  d.push_back(std::string("e") + cp(0x301) + cp(0x302) + cp(0x303) + cp(0x304) + " a" + cp(0x308) +
              cp(0x323) + " " + cp(0x1100) + cp(0x1161) + cp(0x11A8) +
              " Hangul jamo; Devanagari क्षि; "
              "Thai กิ่ ; Arabic marks بِسْمِ ; Hebrew points שָׁלוֹם; zalgo ṱ̵̢̻̝̓̀h̸͖̅̕e̵̡̪̎̕");
  d.push_back(
      "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ　１２３４５６７８９０　！＂＃＄％＆＇（）＊＋，－．／：；＜＝＞"
      "？＠［＼］＾＿｀｛｜｝～ ｶﾞｷﾞ");
  d.push_back(
      "Special tokens inside text: <｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜> and "
      "<｜User｜>question<｜Assistant｜>answer<｜end▁of▁sentence｜>; glued:"
      "word<｜User｜>word<｜Assistant｜><｜Assistant｜>; partial: <｜User <｜Assist <｜ ｜> "
      "<｜fim▁hole｜><｜fim▁begin｜>code<｜fim▁end｜> <｜tool▁calls▁begin｜><｜tool▁sep｜>"
      "<｜▁pad▁｜> spaced < ｜User｜> <|User|> <think></think> <｜place▁holder▁no▁5｜>");
  d.push_back(std::string("Invalid-looking: ") + cp(0xFFFD) + cp(0xFFFE) + cp(0xFFFF) +
              cp(0x10FFFF) + cp(0xE000) + cp(0xF8FF) + cp(0xFFFF0) +
              " overlong-as-text \\xC0\\x80 \\uD800 "
              "%C3%A9 &#x1F600; \\N{SNOWMAN} ﷽ ﷺ ꧁꧂ ༺༻");
  for (std::string& r : random_unicode_docs()) d.push_back(std::move(r));
  return d;
}

std::vector<std::string> random_unicode_docs() {
  std::vector<std::string> d;
  // Characters newer than the system PCRE2's Unicode tables: Kawi, CJK Ext H/I/J, Garay, Sidetic,
  // Tolong Siki, Nag Mundari, new emoji (pink heart), Devanagari Ext-A.
  std::string recent = "recent Unicode:";
  for (char32_t c : {0x11F04u, 0x11F05u, 0x11F12u, 0x31350u, 0x31351u, 0x2EBF0u, 0x323B0u,
                     0x10D4Au, 0x10D4Bu, 0x10D70u, 0x10940u, 0x11DB0u, 0x1E4D0u, 0x1E4D1u,
                     0x1FA77u, 0x1FA75u, 0x1FAE8u, 0x11B00u, 0x1DF25u, 0x1E030u, 0x16EA0u}) {
    s_append(recent, ' ', c);
    utf8_append(recent, c);
    recent += "x1 ";
  }
  d.push_back(recent);
  // Random code points from many assigned blocks (fixed seed: reproducible).
  const std::pair<char32_t, char32_t> ranges[] = {
      {0x20, 0x7E},       {0xA0, 0x24F},      {0x370, 0x3FF},     {0x400, 0x52F},
      {0x530, 0x58F},     {0x590, 0x5FF},     {0x600, 0x6FF},     {0x900, 0x97F},
      {0x980, 0x9FF},     {0xE00, 0xE7F},     {0x10A0, 0x10FF},   {0x1100, 0x11FF},
      {0x1E00, 0x1EFF},   {0x2000, 0x206F},   {0x2190, 0x23FF},   {0x2500, 0x27BF},
      {0x3000, 0x30FF},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},   {0xFF00, 0xFFEF},
      {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F}, {0x1D400, 0x1D7FF}, {0x20000, 0x2A6DF}};
  std::mt19937 rng(20240601);
  // Any scalar value, assigned or not, from every plane.
  for (int doc = 0; doc < 6; ++doc) {
    std::string s;
    for (int i = 0; i < 400; ++i) {
      char32_t c = rng() % 0x110000;
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      s += cp(c);
      if (rng() % 5 == 0) s += ' ';
    }
    d.push_back(s);
  }
  for (int doc = 0; doc < 24; ++doc) {
    std::string s;
    for (int i = 0; i < 400; ++i) {
      auto [lo, hi] = ranges[rng() % std::size(ranges)];
      char32_t c = lo + rng() % (hi - lo + 1);
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      s += cp(c);
      if (rng() % 7 == 0) s += ' ';
    }
    d.push_back(s);
  }
  return d;
}

Corpus build_corpus(const std::string& source_dir) {
  Corpus c;
  auto add_file = [&](const fs::path& p, size_t limit) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return;
    std::string text = read(p, limit);
    if (text.empty() || !utf8_valid(text)) return;
    c.sources.push_back(p.string());
    add_chunks(text, c.docs);
  };
  const fs::path licenses = "/usr/share/common-licenses";
  for (const char* f :
       {"Apache-2.0", "Artistic", "BSD", "CC0-1.0", "GFDL-1.3", "GPL-3", "LGPL-2.1", "MPL-2.0"})
    add_file(licenses / f, 1 << 20);
  add_file("/usr/share/X11/locale/en_US.UTF-8/Compose", 60000);
  add_file("/usr/share/publicsuffix/public_suffix_list.dat", 60000);
  // CJK samples shipped with CPython's test suite (whichever interpreters are installed).
  std::vector<fs::path> cjk;
  std::vector<fs::path> libdirs;
  std::error_code ec;
  for (const char* root : {"/root/.pyenv/versions", "/usr/local/lib", "/usr/lib"}) {
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& e : fs::directory_iterator(root, ec)) {
      libdirs.push_back(e.path());          // /usr/lib/python3.11
      libdirs.push_back(e.path() / "lib");  // pyenv: versions/X/lib
    }
  }
  for (const fs::path& base : libdirs) {
    if (!fs::is_directory(base, ec)) continue;
    std::vector<fs::path> candidates{base / "test/cjkencodings"};
    for (const auto& e : fs::directory_iterator(base, ec))
      if (e.path().filename().string().starts_with("python3"))
        candidates.push_back(e.path() / "test/cjkencodings");
    for (const fs::path& dir : candidates) {
      if (!fs::is_directory(dir, ec)) continue;
      for (const auto& f : fs::directory_iterator(dir, ec))
        if (f.path().filename().string().ends_with("-utf8.txt")) cjk.push_back(f.path());
    }
  }
  std::sort(cjk.begin(), cjk.end());
  std::vector<std::string> seen;
  for (const fs::path& p : cjk) {  // the same sample from two interpreters is added once
    if (std::find(seen.begin(), seen.end(), p.filename().string()) != seen.end()) continue;
    seen.push_back(p.filename().string());
    add_file(p, 1 << 20);
  }
  for (const char* f : {"src/tokenizer/tokenizer.cpp", "src/tokenizer/bpe.cpp",
                        "src/tokenizer/pre_tokenizers.cpp", "tests/tokenizer/hf_reference.cjs"})
    add_file(fs::path(source_dir) / f, 1 << 20);
  add_file(fs::path(source_dir) / "tests/tokenizer/data/edge_cases.txt", 1 << 20);
  for (std::string& d : edge_case_docs()) c.docs.push_back(std::move(d));
  for (const std::string& d : c.docs) {
    c.bytes += d.size();
    for (unsigned char b : d) c.chars += (b & 0xC0) != 0x80;
  }
  return c;
}

}  // namespace deepinfer::tokenizer::testing
