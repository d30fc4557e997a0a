/* minilm.h - flat C ABI of the all-MiniLM-L6-v2 sentence embedding engine (ggml).
 *
 * Style of whisper.cpp/ggml: one header, an opaque context, error codes, no exceptions.
 * Every entry point is safe to call with NULL pointers (it returns an error code) and never
 * lets a C++ exception escape. A context is not thread-safe: use one per thread.
 */
#ifndef MINILM_H
#define MINILM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define MINILM_API __declspec(dllexport)
#else
#  define MINILM_API __attribute__((visibility("default")))
#endif

#define MINILM_ABI_VERSION 1

typedef enum minilm_status {
    MINILM_OK = 0,
    MINILM_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, n < 0, buffer too small, ... */
    MINILM_ERR_FILE_NOT_FOUND = 2,   /* model file cannot be opened */
    MINILM_ERR_BAD_FORMAT = 3,       /* not a GGUF, truncated or corrupted */
    MINILM_ERR_WRONG_ARCH = 4,       /* a valid GGUF of another architecture/shape */
    MINILM_ERR_EMPTY_BATCH = 5,      /* minilm_embed with n_texts == 0 */
    MINILM_ERR_INVALID_UTF8 = 6,     /* reserved: invalid UTF-8 is replaced, not rejected */
    MINILM_ERR_OUT_OF_MEMORY = 7,
    MINILM_ERR_COMPUTE = 8,          /* ggml graph computation failed */
    MINILM_ERR_INTERNAL = 9          /* unexpected internal error (caught exception) */
} minilm_status;

struct minilm_context; /* opaque */

struct minilm_params {
    int32_t n_threads;   /* <= 0: min(4, hardware threads) */
    int32_t max_tokens;  /* truncation length incl. [CLS]/[SEP]; <= 0: model default (256); max 512 */
    int32_t normalize;   /* 1: L2-normalise embeddings (sentence-transformers default) */
};

MINILM_API struct minilm_params minilm_default_params(void);

/* Loads a GGUF written by engines/minilm/convert.py. Returns NULL on failure and, if err is not
 * NULL, stores the reason in *err. The weights are used in place from a read-only memory mapping
 * of the file until minilm_free: the file must not be truncated or rewritten meanwhile. */
MINILM_API struct minilm_context * minilm_init_from_file(const char * path,
                                                         struct minilm_params params,
                                                         minilm_status * err);

MINILM_API void minilm_free(struct minilm_context * ctx);

/* Embedding width (384 for all-MiniLM-L6-v2); 0 if ctx is NULL. */
MINILM_API int32_t minilm_n_embd(const struct minilm_context * ctx);

/* Embeds n_texts NUL-terminated UTF-8 strings into out[n_texts * n_embd] (row-major).
 * out_len is the number of floats out can hold. */
MINILM_API minilm_status minilm_embed(struct minilm_context * ctx,
                                      const char ** texts, int32_t n_texts,
                                      float * out, size_t out_len);

/* Tokenizes one string as the model sees it ([CLS] ... [SEP], truncated to max_tokens).
 * Writes up to ids_cap ids into ids and the full count into *n_ids (call with ids_cap = 0
 * to query the size). */
MINILM_API minilm_status minilm_tokenize(const struct minilm_context * ctx, const char * text,
                                         int32_t * ids, int32_t ids_cap, int32_t * n_ids);

/* Static, never NULL. */
MINILM_API const char * minilm_strerror(minilm_status status);

/* Build information: "minilm <abi> ggml <version> <cpu level>". Static. */
MINILM_API const char * minilm_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MINILM_H */
