// BERT WordPiece tokenizer, same ids as Hugging Face `tokenizers` (BertNormalizer +
// BertPreTokenizer + WordPiece + [CLS]/[SEP] template) for bert-base-uncased style models.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace minilm {

struct tokenizer_config {
    bool lowercase = true;
    bool strip_accents = true;
    bool chinese_chars = true;
    int max_input_chars_per_word = 100;
    int32_t cls_id = 101, sep_id = 102, unk_id = 100, pad_id = 0;
};

class wordpiece_tokenizer {
public:
    wordpiece_tokenizer() = default;
    wordpiece_tokenizer(std::vector<std::string> vocab, tokenizer_config cfg);

    // [CLS] tokens [SEP], truncated to max_tokens (>= 2) the way tokenizers truncates.
    std::vector<int32_t> encode(const std::string & utf8, int max_tokens) const;
    // word pieces without special tokens
    void tokenize(const std::string & utf8, std::vector<int32_t> & out) const;
    size_t vocab_size() const { return vocab_.size(); }

private:
    void wordpiece(const std::u32string & word, std::vector<int32_t> & out) const;
    std::vector<std::string> vocab_;
    std::unordered_map<std::string, int32_t> ids_;
    tokenizer_config cfg_;
};

// exposed for tests
std::u32string utf8_decode(const std::string & s);  // invalid bytes -> U+FFFD
std::string utf8_encode(const std::u32string & s);
std::u32string bert_normalize(const std::u32string & s, const tokenizer_config & cfg);

}  // namespace minilm
