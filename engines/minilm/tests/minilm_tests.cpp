// C++ unit tests for the tokenizer internals and the C ABI error paths.
//   minilm_tests [model.gguf]   (ABI tests that need a model are skipped without one)
#include "gelu.h"
#include "minilm.h"
#include "tokenizer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static int g_fail = 0, g_pass = 0;
#define CHECK(cond) do { if (cond) ++g_pass; else { ++g_fail; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static void test_utf8() {
    using namespace minilm;
    CHECK(utf8_decode("a\xC3\xA9") == std::u32string(U"a\u00E9"));
    CHECK(utf8_decode("\xFF") == std::u32string(1, 0xFFFD));
    CHECK(utf8_decode("\xE2\x82") == std::u32string(2, 0xFFFD));     // truncated sequence
    CHECK(utf8_decode("\xC0\xAF") == std::u32string(2, 0xFFFD));     // overlong
    CHECK(utf8_encode(U"\U0001F600") == "\xF0\x9F\x98\x80");
}

static void test_normalizer() {
    using namespace minilm;
    tokenizer_config c;
    CHECK(bert_normalize(U"H\u00C9llo\tW", c) == std::u32string(U"hello w"));
    CHECK(bert_normalize(U"a\u0001b\u200Bc", c) == std::u32string(U"abc"));  // Cc and Cf removed
    CHECK(bert_normalize(U"\u4E2D\u6587", c) == std::u32string(U" \u4E2D  \u6587 "));
    CHECK(bert_normalize(U"\uAC00", c) == std::u32string(U"\u1100\u1161"));     // Hangul NFD
}

static void test_wordpiece() {
    using namespace minilm;
    std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", ",", "!", "\xE4\xB8\xAD"};
    tokenizer_config c;
    c.pad_id = 0; c.unk_id = 1; c.cls_id = 2; c.sep_id = 3;
    wordpiece_tokenizer t(v, c);
    CHECK((t.encode("Unaffable, hello!", 512) == std::vector<int32_t>{2, 4, 5, 6, 8, 7, 9, 3}));
    CHECK((t.encode("", 512) == std::vector<int32_t>{2, 3}));
    CHECK((t.encode("xyz hello", 512) == std::vector<int32_t>{2, 1, 7, 3}));
    CHECK((t.encode("hello hello hello", 4) == std::vector<int32_t>{2, 7, 7, 3}));
    CHECK((t.encode(std::string(101, 'a'), 512) == std::vector<int32_t>{2, 1, 3}));
    CHECK((t.encode("\xE4\xB8\xAD\xE4\xB8\xAD", 512) == std::vector<int32_t>{2, 10, 10, 3}));
}

static void test_gelu_erf() {
    // Against the libm definition BERT uses, x/2 * (1 + erf(x/sqrt 2)), in double precision.
    double worst = 0;
    for (int i = -200000; i <= 200000; ++i) {
        const float x = i * 1e-4f;
        const double ref = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        worst = std::max(worst, std::fabs(minilm::gelu_erf(x) - ref) / std::max(1.0, std::fabs((double)x)));
    }
    CHECK(worst < 5e-7);
    CHECK(minilm::gelu_erf(0.0f) == 0.0f);
    CHECK(minilm::gelu_erf(-30.0f) == 0.0f && minilm::gelu_erf(30.0f) == 30.0f);  // saturates, no NaN/inf
}

static void test_abi_errors() {
    minilm_status st = MINILM_OK;
    CHECK(minilm_init_from_file(nullptr, minilm_default_params(), &st) == nullptr && st == MINILM_ERR_INVALID_ARGUMENT);
    CHECK(minilm_init_from_file("/nonexistent/model.gguf", minilm_default_params(), &st) == nullptr && st == MINILM_ERR_FILE_NOT_FOUND);
    const char * tmp = "minilm_tests_not_a_gguf.bin";
    if (FILE * f = fopen(tmp, "wb")) { fputs("definitely not a gguf file", f); fclose(f); }
    CHECK(minilm_init_from_file(tmp, minilm_default_params(), &st) == nullptr && st == MINILM_ERR_BAD_FORMAT);
    remove(tmp);
    CHECK(minilm_embed(nullptr, nullptr, 1, nullptr, 0) == MINILM_ERR_INVALID_ARGUMENT);
    CHECK(minilm_n_embd(nullptr) == 0);
    int32_t n = 0;
    CHECK(minilm_tokenize(nullptr, "x", nullptr, 0, &n) == MINILM_ERR_INVALID_ARGUMENT);
    for (int s = 0; s <= 12; ++s) CHECK(minilm_strerror((minilm_status)s) != nullptr);
    minilm_free(nullptr);
    CHECK(std::strncmp(minilm_version(), "minilm ", 7) == 0);
}

static void test_model(const char * path) {
    minilm_status st;
    minilm_context * ctx = minilm_init_from_file(path, minilm_default_params(), &st);
    CHECK(ctx != nullptr && st == MINILM_OK);
    if (!ctx) return;
    const int d = minilm_n_embd(ctx);
    CHECK(d == 384);
    std::string big(100 * 1024, 'x');
    for (size_t i = 0; i < big.size(); i += 7) big[i] = ' ';
    const char * texts[] = {"Hello world", "", big.c_str()};
    std::vector<float> out(3 * d);
    CHECK(minilm_embed(ctx, texts, 3, out.data(), out.size()) == MINILM_OK);
    for (int r = 0; r < 3; ++r) {
        double nn = 0;
        for (int j = 0; j < d; ++j) nn += (double)out[r * d + j] * out[r * d + j];
        CHECK(std::fabs(nn - 1.0) < 1e-4);
    }
    CHECK(minilm_embed(ctx, texts, 0, out.data(), out.size()) == MINILM_ERR_EMPTY_BATCH);
    CHECK(minilm_embed(ctx, texts, 3, out.data(), 10) == MINILM_ERR_INVALID_ARGUMENT);
    int32_t ids[8], n = 0;
    CHECK(minilm_tokenize(ctx, "hello world", ids, 8, &n) == MINILM_OK && n == 4 && ids[0] == 101 && ids[3] == 102);
    CHECK(minilm_tokenize(ctx, big.c_str(), nullptr, 0, &n) == MINILM_OK && n == 256);
    minilm_free(ctx);
}

int main(int argc, char ** argv) {
    test_utf8();
    test_normalizer();
    test_wordpiece();
    test_gelu_erf();
    test_abi_errors();
    if (argc > 1) test_model(argv[1]);
    else fprintf(stderr, "note: no model given, model tests skipped\n");
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
