/*
 * swap/chunks.c — the chunk table's storage and the clean set's search
 * (chunks.h; the list and set operations are inline there).
 */
#include "swap/chunks.h"

lms_status_t chunks_init(chunks_t *t, size_t n)
{
    size_t words = (n + 63) / 64;
    *t = (chunks_t){.n = n, .lru_head = NO_CHUNK, .lru_tail = NO_CHUNK};
    t->ch = base_meta_calloc(n, sizeof *t->ch);
    t->cached = base_meta_calloc(n, sizeof *t->cached);
    t->cached_pos = base_meta_calloc(n, sizeof *t->cached_pos);
    t->clean_bits = base_meta_calloc(words, sizeof *t->clean_bits);
    t->clean_words = base_meta_calloc((words + 63) / 64, sizeof *t->clean_words);
    if (!t->ch || !t->cached || !t->cached_pos || !t->clean_bits || !t->clean_words)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for %zu chunks", n);
    for (size_t c = 0; c < n; c++)
        t->ch[c].free = true;
    return LMS_OK;
}

void chunks_destroy(chunks_t *t)
{
    base_meta_free(t->clean_words);
    base_meta_free(t->clean_bits);
    base_meta_free(t->cached_pos);
    base_meta_free(t->cached);
    base_meta_free(t->ch);
    *t = (chunks_t){0};
}

size_t chunks_next_clean(const chunks_t *t, size_t c)
{
    size_t words = (t->n + 63) / 64;
    for (size_t w = c / 64; w < words;) {
        uint64_t bits = t->clean_bits[w] & (w == c / 64 ? ~0ull << (c % 64) : ~0ull);
        if (bits != 0)
            return w * 64 + (size_t)__builtin_ctzll(bits);
        /* the next non-empty word, 64 words (4096 chunks) per upper word */
        size_t u = (w + 1) / 64;
        uint64_t upper = u < (words + 63) / 64 ? t->clean_words[u] & (~0ull << ((w + 1) % 64)) : 0;
        while (upper == 0 && ++u < (words + 63) / 64)
            upper = t->clean_words[u];
        if (upper == 0)
            return t->n;
        w = u * 64 + (size_t)__builtin_ctzll(upper);
    }
    return t->n;
}
