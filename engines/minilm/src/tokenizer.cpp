#include "tokenizer.h"

#include <algorithm>

namespace minilm {
namespace {

struct uc_range { uint32_t lo, hi; uint8_t cls; };
struct uc_map { uint32_t cp; uint32_t off; uint8_t n; };
#include "unicode_tables.inc"

enum : uint8_t { C_PUNCT = 4, C_SPACE = 8, C_REMOVE = 16 };

uint8_t uclass(char32_t c) {
    const auto * b = std::begin(k_class_ranges), * e = std::end(k_class_ranges);
    const auto * it = std::upper_bound(b, e, (uint32_t)c, [](uint32_t v, const uc_range & r) { return v < r.lo; });
    if (it == b) return 0;
    --it;
    return (c >= it->lo && c <= it->hi) ? it->cls : 0;
}

const uc_map * find_map(const uc_map * b, const uc_map * e, char32_t c) {
    const auto * it = std::lower_bound(b, e, (uint32_t)c, [](const uc_map & m, uint32_t v) { return m.cp < v; });
    return (it != e && it->cp == c) ? it : nullptr;
}

bool is_punct(char32_t c) { return (uclass(c) & C_PUNCT) != 0; }
bool is_chinese(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// The per-code-point BertNormalizer (clean_text, CJK spacing, NFD + strip marks, lowercase) of
// the tokenizers version the tables were probed from (tools/gen_unicode_tables.py).
void normalize_char(char32_t c, std::u32string & out) {
    if (c == 0 || (uclass(c) & C_REMOVE)) return;
    if (const uc_map * m = find_map(std::begin(k_norm), std::end(k_norm), c)) {
        out.append(reinterpret_cast<const char32_t *>(k_pool + m->off), m->n);
    } else if (is_chinese(c)) {
        out.push_back(U' '); out.push_back(c); out.push_back(U' ');
    } else if (c >= 0xAC00 && c <= 0xD7A3) {  // Hangul syllables: algorithmic NFD
        const uint32_t s = c - 0xAC00;
        out.push_back(0x1100 + s / 588);
        out.push_back(0x1161 + (s % 588) / 28);
        if (s % 28) out.push_back(0x11A7 + s % 28);
    } else {
        out.push_back(c);
    }
}

}  // namespace

std::u32string utf8_decode(const std::string & s) {
    std::u32string out;
    out.reserve(s.size());
    const auto * p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        char32_t cp;
        size_t len;
        if (c < 0x80) { cp = c; len = 1; }
        else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; len = 2; }
        else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; len = 3; }
        else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; len = 4; }
        else { out.push_back(0xFFFD); ++i; continue; }
        if (i + len > n) { out.push_back(0xFFFD); ++i; continue; }
        bool ok = true;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) { ok = false; break; }
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
        if (!ok || overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { out.push_back(0xFFFD); ++i; continue; }
        out.push_back(cp);
        i += len;
    }
    return out;
}

std::string utf8_encode(const std::u32string & s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) {
        if (c < 0x80) out.push_back((char)c);
        else if (c < 0x800) { out.push_back((char)(0xC0 | (c >> 6))); out.push_back((char)(0x80 | (c & 0x3F))); }
        else if (c < 0x10000) {
            out.push_back((char)(0xE0 | (c >> 12))); out.push_back((char)(0x80 | ((c >> 6) & 0x3F)));
            out.push_back((char)(0x80 | (c & 0x3F)));
        } else {
            out.push_back((char)(0xF0 | (c >> 18))); out.push_back((char)(0x80 | ((c >> 12) & 0x3F)));
            out.push_back((char)(0x80 | ((c >> 6) & 0x3F))); out.push_back((char)(0x80 | (c & 0x3F)));
        }
    }
    return out;
}

// BertNormalizer with this model's settings (clean_text, handle_chinese_chars, lowercase,
// strip_accents = lowercase). The tables encode exactly those settings; the converter records
// them in the GGUF and the loader rejects other combinations.
std::u32string bert_normalize(const std::u32string & in, const tokenizer_config &) {
    std::u32string a;
    a.reserve(in.size() + 8);
    for (char32_t c : in) normalize_char(c, a);
    return a;
}

wordpiece_tokenizer::wordpiece_tokenizer(std::vector<std::string> vocab, tokenizer_config cfg)
    : vocab_(std::move(vocab)), cfg_(cfg) {
    ids_.reserve(vocab_.size() * 2);
    for (size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], (int32_t)i);  // first wins
}

void wordpiece_tokenizer::wordpiece(const std::u32string & word, std::vector<int32_t> & out) const {
    if ((int)word.size() > cfg_.max_input_chars_per_word) { out.push_back(cfg_.unk_id); return; }
    const size_t mark = out.size();
    size_t start = 0;
    std::string piece;
    while (start < word.size()) {
        size_t end = word.size();
        int32_t found = -1;
        while (start < end) {
            piece = start > 0 ? "##" : "";
            piece += utf8_encode(word.substr(start, end - start));
            auto it = ids_.find(piece);
            if (it != ids_.end()) { found = it->second; break; }
            --end;
        }
        if (found < 0) { out.resize(mark); out.push_back(cfg_.unk_id); return; }
        out.push_back(found);
        start = end;
    }
}

// BertPreTokenizer: split on whitespace, isolate every punctuation char; then WordPiece.
void wordpiece_tokenizer::tokenize(const std::string & utf8, std::vector<int32_t> & out) const {
    const std::u32string norm = bert_normalize(utf8_decode(utf8), cfg_);
    std::u32string word;
    for (char32_t c : norm) {
        if (uclass(c) & C_SPACE) {
            if (!word.empty()) { wordpiece(word, out); word.clear(); }
        } else if (is_punct(c)) {
            if (!word.empty()) { wordpiece(word, out); word.clear(); }
            wordpiece(std::u32string(1, c), out);
        } else {
            word.push_back(c);
        }
    }
    if (!word.empty()) wordpiece(word, out);
}

std::vector<int32_t> wordpiece_tokenizer::encode(const std::string & utf8, int max_tokens) const {
    std::vector<int32_t> pieces;
    tokenize(utf8, pieces);
    if (max_tokens < 2) max_tokens = 2;
    if ((int)pieces.size() > max_tokens - 2) pieces.resize(max_tokens - 2);
    std::vector<int32_t> ids;
    ids.reserve(pieces.size() + 2);
    ids.push_back(cfg_.cls_id);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    ids.push_back(cfg_.sep_id);
    return ids;
}

}  // namespace minilm
