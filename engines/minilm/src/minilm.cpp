// all-MiniLM-L6-v2 (BERT encoder, mean pooling, L2 normalisation) on ggml, behind a flat C ABI.
#include "minilm.h"
#include "gelu.h"
#include "tokenizer.h"

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "gguf.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef MINILM_CPU_LEVEL
#define MINILM_CPU_LEVEL "unknown"
#endif
#ifndef MINILM_GGML_VERSION
#define MINILM_GGML_VERSION "unknown"
#endif

namespace {

// Texts packed into one graph, and the tokens of all of them (see embed_packed).
constexpr int kMaxTextsPerGraph = 32;
constexpr int kMaxTokensPerGraph = 2048;

// Graph capacity, from the loaded model: per layer 21 nodes plus 13 per text (attention on
// views), and 17 leaves; about 10 nodes outside the layers. Rounded up so that no model the
// loader accepts can overflow the graph (ggml aborts the process on overflow).
size_t graph_nodes(int n_layer) { return 64 + (size_t)n_layer * (32 + 16 * kMaxTextsPerGraph); }

struct minilm_error : std::runtime_error {
    minilm_status status;
    minilm_error(minilm_status s, const std::string & what) : std::runtime_error(what), status(s) {}
};

struct layer {
    ggml_tensor *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b, *ln1_w, *ln1_b, *up_w, *up_b, *down_w, *down_b, *ln2_w, *ln2_b;
};

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR && getenv("MINILM_DEBUG")) fputs(text, stderr);
}

}  // namespace

struct minilm_context {
    int n_embd = 0, n_head = 0, n_layer = 0, n_ff = 0, n_ctx = 0, n_vocab = 0;
    float eps = 1e-12f;
    int max_tokens = 256;
    int n_threads = 1;
    bool normalize = true;
    minilm::wordpiece_tokenizer tok;

    ggml_context * wctx = nullptr;  // weights (no_alloc) -> wbuf
    void * map = nullptr;           // read-only mapping of the GGUF; wbuf points into it
    size_t map_size = 0;
    ggml_backend_buffer_t wbuf = nullptr;
    ggml_backend_t backend = nullptr;
    ggml_gallocr_t galloc = nullptr;
    std::vector<uint8_t> graph_meta;
    size_t graph_size = 0;  // node capacity of one graph: graph_nodes(n_layer)

    ggml_tensor *tok_embd = nullptr, *pos_embd = nullptr, *type_embd = nullptr, *ln_w = nullptr, *ln_b = nullptr;
    std::vector<layer> layers;

    ~minilm_context() {
        if (galloc) ggml_gallocr_free(galloc);
        if (backend) ggml_backend_free(backend);
        if (wbuf) ggml_backend_buffer_free(wbuf);
        if (map) munmap(map, map_size);
        if (wctx) ggml_free(wctx);
    }
};

namespace {

struct gguf_guard {
    gguf_context * g = nullptr;
    ~gguf_guard() { if (g) gguf_free(g); }
};
struct file_guard {
    FILE * f = nullptr;
    ~file_guard() { if (f) fclose(f); }
};

int64_t key_or_throw(gguf_context * g, const char * key, gguf_type type) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) throw minilm_error(MINILM_ERR_WRONG_ARCH, std::string("missing key ") + key);
    if (gguf_get_kv_type(g, id) != type) throw minilm_error(MINILM_ERR_BAD_FORMAT, std::string("bad type for key ") + key);
    return id;
}
uint32_t get_u32(gguf_context * g, const char * key) { return gguf_get_val_u32(g, key_or_throw(g, key, GGUF_TYPE_UINT32)); }
bool get_bool(gguf_context * g, const char * key, bool dflt) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) return dflt;
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_BOOL) throw minilm_error(MINILM_ERR_BAD_FORMAT, std::string("bad type for key ") + key);
    return gguf_get_val_bool(g, id);
}

void load(minilm_context & m, const char * path) {
    file_guard fg;
    fg.f = fopen(path, "rb");
    if (!fg.f) throw minilm_error(MINILM_ERR_FILE_NOT_FOUND, path);
    if (fseek(fg.f, 0, SEEK_END) != 0) throw minilm_error(MINILM_ERR_BAD_FORMAT, "cannot seek");
    const long fsize = ftell(fg.f);
    rewind(fg.f);
    if (fsize < 8) throw minilm_error(MINILM_ERR_BAD_FORMAT, "file too small");
    char magic[4];
    if (fread(magic, 1, 4, fg.f) != 4 || memcmp(magic, "GGUF", 4) != 0) throw minilm_error(MINILM_ERR_BAD_FORMAT, "not a GGUF file");
    rewind(fg.f);

    gguf_guard gg;
    ggml_context * meta = nullptr;
    gguf_init_params ip = {/*no_alloc*/ true, &meta};
    gg.g = gguf_init_from_file_ptr(fg.f, ip);
    if (!gg.g) throw minilm_error(MINILM_ERR_BAD_FORMAT, "corrupted GGUF header");
    m.wctx = meta;  // owns tensor metadata, no data
    gguf_context * g = gg.g;

    const int64_t arch_id = key_or_throw(g, "general.architecture", GGUF_TYPE_STRING);
    if (std::string(gguf_get_val_str(g, arch_id)) != "bert") throw minilm_error(MINILM_ERR_WRONG_ARCH, "architecture is not bert");
    m.n_embd = (int)get_u32(g, "bert.embedding_length");
    m.n_head = (int)get_u32(g, "bert.attention.head_count");
    m.n_layer = (int)get_u32(g, "bert.block_count");
    m.n_ff = (int)get_u32(g, "bert.feed_forward_length");
    m.n_ctx = (int)get_u32(g, "bert.context_length");
    m.eps = gguf_get_val_f32(g, key_or_throw(g, "bert.attention.layer_norm_epsilon", GGUF_TYPE_FLOAT32));
    if (m.n_embd <= 0 || m.n_embd > 65536 || m.n_head <= 0 || m.n_embd % m.n_head != 0 || m.n_layer <= 0 ||
        m.n_layer > 256 || m.n_ff <= 0 || m.n_ff > 1 << 20 || m.n_ctx < 2 || m.n_ctx > 1 << 16 || !(m.eps > 0 && m.eps < 1))
        throw minilm_error(MINILM_ERR_WRONG_ARCH, "unsupported hyper-parameters");
    const int64_t msl = gguf_find_key(g, "minilm.max_seq_length");
    int dflt_max = m.n_ctx;
    if (msl >= 0 && gguf_get_kv_type(g, msl) == GGUF_TYPE_UINT32) dflt_max = (int)std::min<uint32_t>(gguf_get_val_u32(g, msl), m.n_ctx);
    if (m.max_tokens <= 0) m.max_tokens = dflt_max;
    m.max_tokens = std::max(2, std::min(m.max_tokens, m.n_ctx));

    // tokenizer
    const int64_t model_id = key_or_throw(g, "tokenizer.ggml.model", GGUF_TYPE_STRING);
    if (std::string(gguf_get_val_str(g, model_id)) != "bert") throw minilm_error(MINILM_ERR_WRONG_ARCH, "tokenizer is not WordPiece");
    const int64_t toks = key_or_throw(g, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    if (gguf_get_arr_type(g, toks) != GGUF_TYPE_STRING) throw minilm_error(MINILM_ERR_BAD_FORMAT, "tokens is not a string array");
    const size_t n_vocab = gguf_get_arr_n(g, toks);
    if (n_vocab < 4 || n_vocab > (1u << 24)) throw minilm_error(MINILM_ERR_BAD_FORMAT, "bad vocabulary size");
    std::vector<std::string> vocab(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) vocab[i] = gguf_get_arr_str(g, toks, i);
    minilm::tokenizer_config tc;
    tc.cls_id = (int32_t)get_u32(g, "tokenizer.ggml.cls_token_id");
    tc.sep_id = (int32_t)get_u32(g, "tokenizer.ggml.seperator_token_id");
    tc.unk_id = (int32_t)get_u32(g, "tokenizer.ggml.unknown_token_id");
    tc.pad_id = (int32_t)get_u32(g, "tokenizer.ggml.padding_token_id");
    for (int32_t id : {tc.cls_id, tc.sep_id, tc.unk_id, tc.pad_id})
        if (id < 0 || (size_t)id >= n_vocab) throw minilm_error(MINILM_ERR_BAD_FORMAT, "special token id out of range");
    tc.lowercase = get_bool(g, "minilm.tokenizer.do_lower_case", true);
    tc.strip_accents = get_bool(g, "minilm.tokenizer.strip_accents", tc.lowercase);
    tc.chinese_chars = get_bool(g, "minilm.tokenizer.tokenize_chinese_chars", true);
    m.n_vocab = (int)n_vocab;
    m.tok = minilm::wordpiece_tokenizer(std::move(vocab), tc);

    // tensors: look up, check shapes and types, then read data
    auto T = [&](const std::string & name, int64_t ne0, int64_t ne1, bool matrix) -> ggml_tensor * {
        ggml_tensor * t = ggml_get_tensor(meta, name.c_str());
        if (!t) throw minilm_error(MINILM_ERR_WRONG_ARCH, "missing tensor " + name);
        if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
            throw minilm_error(MINILM_ERR_WRONG_ARCH, "bad shape for tensor " + name);
        const bool ok = t->type == GGML_TYPE_F32 || (matrix && (t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_Q8_0));
        if (!ok) throw minilm_error(MINILM_ERR_WRONG_ARCH, "unsupported type for tensor " + name);
        return t;
    };
    const int64_t d = m.n_embd, ff = m.n_ff;
    m.tok_embd = T("token_embd.weight", d, m.n_vocab, true);
    m.pos_embd = T("position_embd.weight", d, m.n_ctx, false);
    m.type_embd = ggml_get_tensor(meta, "token_types.weight");
    if (!m.type_embd || m.type_embd->ne[0] != d || m.type_embd->ne[1] < 1 || m.type_embd->ne[2] != 1 || m.type_embd->type != GGML_TYPE_F32)
        throw minilm_error(MINILM_ERR_WRONG_ARCH, "bad tensor token_types.weight");
    m.ln_w = T("token_embd_norm.weight", d, 1, false);
    m.ln_b = T("token_embd_norm.bias", d, 1, false);
    m.layers.resize(m.n_layer);
    for (int i = 0; i < m.n_layer; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        layer & L = m.layers[i];
        L.q_w = T(p + "attn_q.weight", d, d, true);          L.q_b = T(p + "attn_q.bias", d, 1, false);
        L.k_w = T(p + "attn_k.weight", d, d, true);          L.k_b = T(p + "attn_k.bias", d, 1, false);
        L.v_w = T(p + "attn_v.weight", d, d, true);          L.v_b = T(p + "attn_v.bias", d, 1, false);
        L.o_w = T(p + "attn_output.weight", d, d, true);     L.o_b = T(p + "attn_output.bias", d, 1, false);
        L.ln1_w = T(p + "attn_output_norm.weight", d, 1, false); L.ln1_b = T(p + "attn_output_norm.bias", d, 1, false);
        L.up_w = T(p + "ffn_up.weight", d, ff, true);        L.up_b = T(p + "ffn_up.bias", ff, 1, false);
        L.down_w = T(p + "ffn_down.weight", ff, d, true);    L.down_b = T(p + "ffn_down.bias", d, 1, false);
        L.ln2_w = T(p + "layer_output_norm.weight", d, 1, false); L.ln2_b = T(p + "layer_output_norm.bias", d, 1, false);
    }

    m.backend = ggml_backend_cpu_init();
    if (!m.backend) throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "cannot create CPU backend");
    ggml_backend_cpu_set_n_threads(m.backend, m.n_threads);
    // The weights are used in place from a read-only mapping of the file: loading copies nothing,
    // and processes serving the same GGUF share its pages (the file must not change while mapped).
    const size_t data_off = gguf_get_data_offset(g);
    if (data_off > (size_t)fsize) throw minilm_error(MINILM_ERR_BAD_FORMAT, "truncated file");
    m.map_size = (size_t)fsize;
    m.map = mmap(nullptr, m.map_size, PROT_READ, MAP_PRIVATE, fileno(fg.f), 0);
    if (m.map == MAP_FAILED) {
        m.map = nullptr;
        throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "cannot map the model file");
    }
    char * data = static_cast<char *>(m.map) + data_off;
    // ggml's CPU buffer needs 32-byte aligned data (convert.py writes GGUF's default alignment, 32).
    if (reinterpret_cast<uintptr_t>(data) % 32 != 0) throw minilm_error(MINILM_ERR_BAD_FORMAT, "tensor data not 32-byte aligned");
    m.wbuf = ggml_backend_cpu_buffer_from_ptr(data, (size_t)fsize - data_off);
    if (!m.wbuf) throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "cannot create weights buffer");
    ggml_backend_buffer_set_usage(m.wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(g, i));
        if (!t) throw minilm_error(MINILM_ERR_BAD_FORMAT, "tensor table mismatch");
        const size_t off = gguf_get_tensor_offset(g, i), n = ggml_nbytes(t);
        if (off > (size_t)fsize - data_off || n > (size_t)fsize - data_off - off)
            throw minilm_error(MINILM_ERR_BAD_FORMAT, "truncated file");
        if (off % 32 != 0) throw minilm_error(MINILM_ERR_BAD_FORMAT, "tensor data not 32-byte aligned");
        if (ggml_backend_tensor_alloc(m.wbuf, t, data + off) != GGML_STATUS_SUCCESS)
            throw minilm_error(MINILM_ERR_BAD_FORMAT, "cannot place tensor");
    }
    // weights are finite? a corrupted payload must not produce NaN silently: checked on output instead.
    m.galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(m.backend));
    if (!m.galloc) throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "cannot create allocator");
    m.graph_size = graph_nodes(m.n_layer);
    m.graph_meta.resize(ggml_tensor_overhead() * m.graph_size + ggml_graph_overhead_custom(m.graph_size, false));
}

// ggml custom op: rows of a (contiguous f32) split between the graph's threads.
void gelu_erf_rows(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void *) {
    const int64_t rows = ggml_nrows(a), cols = a->ne[0], per = (rows + nth - 1) / nth;
    for (int64_t r = ith * per; r < std::min(rows, (ith + 1) * per); ++r) {
        const float * x = reinterpret_cast<const float *>(static_cast<const char *>(a->data) + r * a->nb[1]);
        float * y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + r * dst->nb[1]);
        for (int64_t i = 0; i < cols; ++i) y[i] = minilm::gelu_erf(x[i]);
    }
}

// Texts packed into one graph: token-wise layers (projections, norms, FFN) run as one matmul over
// every token of every text, which lets ggml's tiled sgemm work on wide matrices; attention runs
// per text on views, so no padding or mask is needed and each row is computed exactly as it would
// be alone (batched results equal single-text results bit for bit).
void embed_packed(minilm_context & m, const std::vector<std::vector<int32_t>> & seqs, size_t first, size_t count, float * out) {
    const int d = m.n_embd, H = m.n_head, hd = d / H;
    std::vector<int32_t> ids, pv;
    std::vector<int> off;
    for (size_t s = first; s < first + count; ++s) {
        off.push_back((int)ids.size());
        for (size_t i = 0; i < seqs[s].size(); ++i) { ids.push_back(seqs[s][i]); pv.push_back((int32_t)i); }
    }
    off.push_back((int)ids.size());
    const int N = (int)ids.size();

    ggml_init_params ip = {m.graph_meta.size(), m.graph_meta.data(), /*no_alloc*/ true};
    ggml_context * ctx = ggml_init(ip);
    if (!ctx) throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "ggml_init");
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> ctx_guard(ctx, ggml_free);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, m.graph_size, false);

    ggml_tensor * inp = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N);
    ggml_set_input(inp);
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N);
    ggml_set_input(pos);

    ggml_tensor * x = ggml_get_rows(ctx, m.tok_embd, inp);
    x = ggml_add(ctx, x, ggml_get_rows(ctx, m.pos_embd, pos));
    x = ggml_add(ctx, x, ggml_view_1d(ctx, m.type_embd, d, 0));  // token type 0
    x = ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, m.eps), m.ln_w), m.ln_b);

    const float scale = 1.0f / std::sqrt((float)hd);
    const size_t row = sizeof(float) * d;
    for (const layer & L : m.layers) {
        ggml_tensor * q = ggml_add(ctx, ggml_mul_mat(ctx, L.q_w, x), L.q_b);
        ggml_tensor * k = ggml_add(ctx, ggml_mul_mat(ctx, L.k_w, x), L.k_b);
        ggml_tensor * v = ggml_add(ctx, ggml_mul_mat(ctx, L.v_w, x), L.v_b);
        // Each text's attention output is copied into its rows of kqv_all (a leaf: allocated for
        // the whole graph, so the copies cannot be overwritten before the output projection).
        ggml_tensor * kqv_all = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, N);
        for (size_t s = 0; s < count; ++s) {
            const int n = off[s + 1] - off[s];
            const size_t o = row * off[s];
            auto heads = [&](ggml_tensor * t) { return ggml_view_3d(ctx, t, hd, H, n, sizeof(float) * hd, row, o); };  // [hd, H, n]
            ggml_tensor * qs = ggml_permute(ctx, heads(q), 0, 2, 1, 3);                 // [hd, n, H]
            ggml_tensor * ks = ggml_permute(ctx, heads(k), 0, 2, 1, 3);                 // [hd, n, H]
            ggml_tensor * vs = ggml_cont(ctx, ggml_permute(ctx, heads(v), 1, 2, 0, 3)); // [n, hd, H]
            ggml_tensor * kq = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, ks, qs), nullptr, scale, 0.0f);  // [n_k, n_q, H]
            ggml_tensor * kqv = ggml_permute(ctx, ggml_mul_mat(ctx, vs, kq), 0, 2, 1, 3);  // [hd, H, n]
            ggml_build_forward_expand(gf, ggml_cpy(ctx, kqv, heads(kqv_all)));
        }
        ggml_tensor * att = ggml_add(ctx, ggml_mul_mat(ctx, L.o_w, kqv_all), L.o_b);
        x = ggml_add(ctx, x, att);
        x = ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, m.eps), L.ln1_w), L.ln1_b);
        ggml_tensor * h = ggml_map_custom1(ctx, ggml_add(ctx, ggml_mul_mat(ctx, L.up_w, x), L.up_b), gelu_erf_rows,
                                           GGML_N_TASKS_MAX, nullptr);
        h = ggml_add(ctx, ggml_mul_mat(ctx, L.down_w, h), L.down_b);
        x = ggml_add(ctx, x, h);
        x = ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, m.eps), L.ln2_w), L.ln2_b);
    }
    ggml_set_output(x);
    ggml_build_forward_expand(gf, x);

    if (!ggml_gallocr_alloc_graph(m.galloc, gf)) throw minilm_error(MINILM_ERR_OUT_OF_MEMORY, "cannot allocate graph");
    ggml_backend_tensor_set(inp, ids.data(), 0, sizeof(int32_t) * N);
    ggml_backend_tensor_set(pos, pv.data(), 0, sizeof(int32_t) * N);
    if (ggml_backend_graph_compute(m.backend, gf) != GGML_STATUS_SUCCESS) throw minilm_error(MINILM_ERR_COMPUTE, "graph compute failed");

    std::vector<float> hs((size_t)d * N);
    ggml_backend_tensor_get(x, hs.data(), 0, hs.size() * sizeof(float));
    for (size_t s = 0; s < count; ++s) {
        const int n = off[s + 1] - off[s];
        std::vector<double> acc(d, 0.0);
        for (int t = off[s]; t < off[s + 1]; ++t)
            for (int j = 0; j < d; ++j) acc[j] += hs[(size_t)t * d + j];
        double norm = 0.0;
        for (int j = 0; j < d; ++j) { acc[j] /= n; norm += acc[j] * acc[j]; }
        norm = std::sqrt(norm);
        if (!std::isfinite(norm)) throw minilm_error(MINILM_ERR_COMPUTE, "non-finite embedding (corrupted weights?)");
        const double inv = (m.normalize && norm > 0) ? 1.0 / std::max(norm, 1e-12) : 1.0;
        float * o = out + (first + s) * (size_t)d;
        for (int j = 0; j < d; ++j) o[j] = (float)(acc[j] * inv);
    }
}

// Texts -> [n_texts, n_embd], in graphs of at most kMaxTextsPerGraph texts / kMaxTokensPerGraph tokens.
void embed_all(minilm_context & m, const std::vector<std::vector<int32_t>> & seqs, float * out) {
    for (size_t first = 0; first < seqs.size();) {
        size_t count = 0, tokens = 0;
        while (first + count < seqs.size() && count < kMaxTextsPerGraph &&
               (count == 0 || tokens + seqs[first + count].size() <= kMaxTokensPerGraph))
            tokens += seqs[first + count++].size();
        embed_packed(m, seqs, first, count, out);
        first += count;
    }
}

template <class F>
minilm_status guarded(F && f) {
    try {
        return f();
    } catch (const minilm_error & e) {
        if (getenv("MINILM_DEBUG")) fprintf(stderr, "minilm: %s\n", e.what());
        return e.status;
    } catch (const std::bad_alloc &) {
        return MINILM_ERR_OUT_OF_MEMORY;
    } catch (...) {
        return MINILM_ERR_INTERNAL;
    }
}

}  // namespace

extern "C" {

struct minilm_params minilm_default_params(void) {
    minilm_params p;
    p.n_threads = 0;
    p.max_tokens = 0;
    p.normalize = 1;
    return p;
}

struct minilm_context * minilm_init_from_file(const char * path, struct minilm_params params, minilm_status * err) {
    minilm_context * out = nullptr;
    const minilm_status st = guarded([&]() -> minilm_status {
        if (!path) return MINILM_ERR_INVALID_ARGUMENT;
        ggml_log_set(quiet_log, nullptr);
        auto m = std::make_unique<minilm_context>();
        const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
        m->n_threads = params.n_threads > 0 ? std::min(params.n_threads, 256) : (int)std::min(4u, hw);
        m->max_tokens = params.max_tokens;
        m->normalize = params.normalize != 0;
        load(*m, path);
        out = m.release();
        return MINILM_OK;
    });
    if (err) *err = st;
    return out;
}

void minilm_free(struct minilm_context * ctx) {
    try { delete ctx; } catch (...) {}
}

int32_t minilm_n_embd(const struct minilm_context * ctx) { return ctx ? ctx->n_embd : 0; }

minilm_status minilm_embed(struct minilm_context * ctx, const char ** texts, int32_t n_texts, float * out, size_t out_len) {
    return guarded([&]() -> minilm_status {
        if (!ctx || n_texts < 0) return MINILM_ERR_INVALID_ARGUMENT;
        if (n_texts == 0) return MINILM_ERR_EMPTY_BATCH;
        if (!texts || !out || out_len < (size_t)n_texts * (size_t)ctx->n_embd) return MINILM_ERR_INVALID_ARGUMENT;
        for (int32_t i = 0; i < n_texts; ++i) if (!texts[i]) return MINILM_ERR_INVALID_ARGUMENT;
        std::vector<std::vector<int32_t>> seqs;
        for (int32_t i = 0; i < n_texts; ++i) seqs.push_back(ctx->tok.encode(texts[i], ctx->max_tokens));
        embed_all(*ctx, seqs, out);
        return MINILM_OK;
    });
}

minilm_status minilm_tokenize(const struct minilm_context * ctx, const char * text, int32_t * ids, int32_t ids_cap, int32_t * n_ids) {
    return guarded([&]() -> minilm_status {
        if (!ctx || !text || !n_ids || ids_cap < 0 || (ids_cap > 0 && !ids)) return MINILM_ERR_INVALID_ARGUMENT;
        const std::vector<int32_t> v = ctx->tok.encode(text, ctx->max_tokens);
        *n_ids = (int32_t)v.size();
        std::copy(v.begin(), v.begin() + std::min<size_t>(v.size(), (size_t)ids_cap), ids);
        return (size_t)ids_cap >= v.size() || ids_cap == 0 ? MINILM_OK : MINILM_ERR_INVALID_ARGUMENT;
    });
}

const char * minilm_strerror(minilm_status s) {
    switch (s) {
        case MINILM_OK: return "ok";
        case MINILM_ERR_INVALID_ARGUMENT: return "invalid argument";
        case MINILM_ERR_FILE_NOT_FOUND: return "model file not found or not readable";
        case MINILM_ERR_BAD_FORMAT: return "not a valid GGUF file (truncated or corrupted)";
        case MINILM_ERR_WRONG_ARCH: return "GGUF is not an all-MiniLM (bert) model of the expected shape";
        case MINILM_ERR_EMPTY_BATCH: return "empty batch";
        case MINILM_ERR_INVALID_UTF8: return "invalid UTF-8";
        case MINILM_ERR_OUT_OF_MEMORY: return "out of memory";
        case MINILM_ERR_COMPUTE: return "computation failed";
        case MINILM_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

const char * minilm_version(void) {
    return "minilm 1 ggml " MINILM_GGML_VERSION " " MINILM_CPU_LEVEL;
}

}  // extern "C"
