/* tests/support/json.c — see json.h. Recursive descent, depth-limited. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define MAX_DEPTH 64

typedef struct parser {
    const char *s;
    size_t len, pos;
    char *error;
    size_t error_len;
    bool failed;
} parser_t;

static void json_free_contents(json_t *v);

static void fail(parser_t *p, const char *what)
{
    if (!p->failed)
        snprintf(p->error, p->error_len, "%s at byte %zu", what, p->pos);
    p->failed = true;
}

static void skip_space(parser_t *p)
{
    while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) != NULL && p->s[p->pos] != '\0')
        p->pos++;
}

static bool literal(parser_t *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static int hex4(parser_t *p)
{
    if (p->len - p->pos < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v = v * 16 + (c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1000000);
    }
    return v < 0 ? -1 : v;
}

/* A string at p->pos (its opening quote), unescaped into a new buffer. */
static char *string(parser_t *p)
{
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        fail(p, "expected a string");
        return NULL;
    }
    p->pos++;
    char *out = malloc(p->len - p->pos + 1), *o = out;
    if (out == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    while (p->pos < p->len && p->s[p->pos] != '"') {
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c < 0x20) {
            fail(p, "control character in a string");
            break;
        }
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        if (p->pos >= p->len)
            break;
        char e = p->s[p->pos++];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *k = e != '\0' ? strchr(from, e) : NULL;
        if (k != NULL) {
            *o++ = to[k - from];
        } else if (e == 'u') {
            int u = hex4(p);
            if (u < 0) {
                fail(p, "bad \\u escape");
                break;
            }
            if (u < 0x80) {
                *o++ = (char)u;
            } else if (u < 0x800) {
                *o++ = (char)(0xc0 | u >> 6);
                *o++ = (char)(0x80 | (u & 0x3f));
            } else { /* surrogates are kept as they are: tests compare ASCII */
                *o++ = (char)(0xe0 | u >> 12);
                *o++ = (char)(0x80 | (u >> 6 & 0x3f));
                *o++ = (char)(0x80 | (u & 0x3f));
            }
        } else {
            fail(p, "bad escape");
            break;
        }
    }
    if (!p->failed && (p->pos >= p->len || p->s[p->pos] != '"'))
        fail(p, "unterminated string");
    if (p->failed) {
        free(out);
        return NULL;
    }
    p->pos++;
    *o = '\0';
    return out;
}

/* Digits at p->pos, skipped; how many. */
static size_t digits(parser_t *p)
{
    size_t start = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
        p->pos++;
    return p->pos - start;
}

/* The JSON number grammar, checked before strtod reads it. */
static bool number(parser_t *p, double *out)
{
    size_t start = p->pos;
    const char *s = p->s;
    if (p->pos < p->len && s[p->pos] == '-')
        p->pos++;
    if (p->pos < p->len && s[p->pos] == '0')
        p->pos++;
    else if (digits(p) == 0)
        return false;
    if (p->pos < p->len && s[p->pos] == '.') {
        p->pos++;
        if (digits(p) == 0)
            return false;
    }
    if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
            p->pos++;
        if (digits(p) == 0)
            return false;
    }
    char buf[64];
    size_t n = p->pos - start;
    if (n >= sizeof buf)
        return false;
    memcpy(buf, s + start, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    return isfinite(*out);
}

static bool value(parser_t *p, json_t *v, int depth);

static bool push(parser_t *p, json_t *v, json_t *item, char *key)
{
    json_t *items = realloc(v->items, (v->n + 1) * sizeof *items);
    if (items == NULL) {
        fail(p, "out of memory");
        return false;
    }
    v->items = items;
    if (v->kind == JSON_OBJECT) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
        if (keys == NULL) {
            fail(p, "out of memory");
            return false;
        }
        v->keys = keys;
        keys[v->n] = key;
    }
    items[v->n++] = *item;
    return true;
}

static bool container(parser_t *p, json_t *v, int depth, bool object)
{
    char close = object ? '}' : ']';
    v->kind = object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return true;
    }
    for (;;) {
        char *key = NULL;
        if (object) {
            skip_space(p);
            if ((key = string(p)) == NULL)
                return false;
            skip_space(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                fail(p, "expected ':'");
                return false;
            }
            p->pos++;
        }
        json_t item = {0};
        if (!value(p, &item, depth + 1) || !push(p, v, &item, key)) {
            free(key);
            json_free_contents(&item);
            return false;
        }
        skip_space(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return true;
        }
        fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        return false;
    }
}

static bool value(parser_t *p, json_t *v, int depth)
{
    if (depth > MAX_DEPTH) {
        fail(p, "nested too deep");
        return false;
    }
    skip_space(p);
    if (p->pos >= p->len) {
        fail(p, "expected a value");
        return false;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[')
        return container(p, v, depth, c == '{');
    if (c == '"') {
        v->kind = JSON_STRING;
        return (v->string = string(p)) != NULL;
    }
    if (literal(p, "true") || literal(p, "false")) {
        v->kind = JSON_BOOL;
        v->boolean = p->s[p->pos - 1] == 'e' && p->s[p->pos - 2] == 'u';
        return true;
    }
    if (literal(p, "null")) {
        v->kind = JSON_NULL;
        return true;
    }
    v->kind = JSON_NUMBER;
    if (!number(p, &v->number)) {
        fail(p, "expected a value");
        return false;
    }
    return true;
}

static void json_free_contents(json_t *v)
{
    for (size_t i = 0; i < v->n; i++) {
        json_free_contents(&v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    *v = (json_t){0};
}

json_t *json_parse(const char *text, size_t len, char *error, size_t error_len)
{
    char scratch[1];
    parser_t p = {text, len, 0, error ? error : scratch, error ? error_len : sizeof scratch, false};
    json_t *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    if (value(&p, v, 0)) {
        skip_space(&p);
        if (p.pos != len)
            fail(&p, "text after the value");
    }
    if (p.failed) {
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(json_t *v)
{
    if (v == NULL)
        return;
    json_free_contents(v);
    free(v);
}

const json_t *json_get(const json_t *v, const char *key)
{
    if (v == NULL || v->kind != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}
