/*
 * tools/report_json.c — lms-report's JSON scanner: one line of a timeline at
 * a time, each leaf value handed to a visitor with its path ("ts",
 * "args.bytes", "otherData.stats.bytes_h2d"). Strings are decoded into the
 * scanner's buffer; numbers are doubles, with the exact integer where one
 * was written. The first error and where it was are kept in the jscan_t.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

bool jfail(jscan_t *js, const char *why)
{
    if (js->err == NULL) {
        js->err = why;
        js->err_at = js->p;
    }
    return false;
}

void jskip_ws(jscan_t *js)
{
    while (*js->p == ' ' || *js->p == '\t' || *js->p == '\r' || *js->p == '\n')
        js->p++;
}

static void utf8_put(char *out, size_t cap, size_t *n, unsigned cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    }
    if (*n + k < cap) {
        memcpy(out + *n, b, k);
        *n += k;
    }
}

/* A string at js->p into out (cap bytes, NUL-terminated; longer strings are
 * shortened, whole characters kept only as far as \u escapes go). */
bool jstring(jscan_t *js, char *out, size_t cap)
{
    size_t n = 0;
    if (*js->p != '"')
        return jfail(js, "expected a string");
    js->p++;
    for (;;) {
        unsigned char c = (unsigned char)*js->p;
        if (c == '\0' || c == '\n')
            return jfail(js, "a string is not closed");
        if (c < 0x20)
            return jfail(js, "a control character in a string");
        js->p++;
        if (c == '"')
            break;
        if (c != '\\') {
            if (n + 1 < cap)
                out[n++] = (char)c;
            continue;
        }
        char e = *js->p++;
        unsigned cp = 0;
        switch (e) {
        case '"': case '\\': case '/': cp = (unsigned char)e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            for (int i = 0; i < 4; i++) {
                char h = *js->p++;
                unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                             : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                             : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                    : 16u;
                if (d == 16) {
                    js->p--;
                    return jfail(js, "a bad \\u escape");
                }
                cp = cp << 4 | d;
            }
            if (cp >= 0xd800 && cp < 0xe000)
                cp = '?'; /* a surrogate half: only names carry these */
            break;
        default:
            js->p--;
            return jfail(js, "a bad escape in a string");
        }
        utf8_put(out, cap, &n, cp);
    }
    out[n] = '\0';
    return true;
}

/* A number as JSON writes them (no inf, nan, hex or leading +). */
static bool jnumber(jscan_t *js, jvalue_t *v)
{
    const char *s = js->p, *q = s;
    bool integer = true;
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (*q >= '1' && *q <= '9')
        while (*q >= '0' && *q <= '9')
            q++;
    else
        return jfail(js, "expected a value");
    if (*q == '.') {
        integer = false;
        q++;
        if (!(*q >= '0' && *q <= '9'))
            return jfail(js, "a number with nothing after its '.'");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        integer = false;
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return jfail(js, "a number with a bad exponent");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    v->kind = J_NUMBER;
    v->num = strtod(s, NULL);
    v->is_uint = integer && *s != '-';
    if (v->is_uint) {
        errno = 0;
        unsigned long long u = strtoull(s, NULL, 10);
        v->is_uint = errno == 0;
        v->u = u;
    }
    js->p = q;
    return true;
}

/* An object at js->p; its members' paths are path + "." + key. */
bool jobject(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    if (depth >= JSON_MAX_DEPTH)
        return jfail(js, "objects nested too deep");
    js->p++; /* '{' */
    jskip_ws(js);
    if (*js->p == '}') {
        js->p++;
        return true;
    }
    for (;;) {
        char key[128];
        jskip_ws(js);
        if (!jstring(js, key, sizeof key))
            return false;
        jskip_ws(js);
        if (*js->p != ':')
            return jfail(js, "expected ':' after a key");
        js->p++;
        jskip_ws(js);
        size_t klen = strlen(key);
        size_t sep = plen > 0 ? 1 : 0;
        if (plen + sep + klen + 1 > 256)
            return jfail(js, "a key path too long");
        if (sep)
            path[plen] = '.';
        memcpy(path + plen + sep, key, klen + 1);
        if (!jvalue(js, path, plen + sep + klen, depth + 1, visit, ctx))
            return false;
        path[plen] = '\0';
        jskip_ws(js);
        if (*js->p == ',') {
            js->p++;
            continue;
        }
        if (*js->p == '}') {
            js->p++;
            return true;
        }
        return jfail(js, "expected ',' or '}' in an object");
    }
}

/* An array: its elements are read and left unvisited (the format has none). */
static bool jarray(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    (void)visit;
    if (depth >= JSON_MAX_DEPTH)
        return jfail(js, "arrays nested too deep");
    js->p++; /* '[' */
    jskip_ws(js);
    if (*js->p == ']') {
        js->p++;
        return true;
    }
    for (;;) {
        jskip_ws(js);
        if (!jvalue(js, path, plen, depth + 1, NULL, ctx))
            return false;
        jskip_ws(js);
        if (*js->p == ',') {
            js->p++;
            continue;
        }
        if (*js->p == ']') {
            js->p++;
            return true;
        }
        return jfail(js, "expected ',' or ']' in an array");
    }
}

bool jvalue(jscan_t *js, char *path, size_t plen, int depth, jvisit_fn visit, void *ctx)
{
    jvalue_t v = {0};
    const char *at = js->p;
    switch (*js->p) {
    case '{': return jobject(js, path, plen, depth, visit, ctx);
    case '[': return jarray(js, path, plen, depth, visit, ctx);
    case '"':
        if (!jstring(js, js->str, sizeof js->str))
            return false;
        v.kind = J_STRING;
        v.str = js->str;
        break;
    case 't':
    case 'f':
    case 'n': {
        static const struct { const char *word; jkind_t kind; bool b; } words[] = {
            {"true", J_BOOL, true}, {"false", J_BOOL, false}, {"null", J_NULL, false}};
        size_t i;
        for (i = 0; i < 3; i++)
            if (strncmp(js->p, words[i].word, strlen(words[i].word)) == 0)
                break;
        if (i == 3)
            return jfail(js, "expected a value");
        js->p += strlen(words[i].word);
        v.kind = words[i].kind;
        v.b = words[i].b;
        break;
    }
    default:
        if (!jnumber(js, &v))
            return false;
    }
    if (visit != NULL) {
        const char *why = visit(ctx, path, &v);
        if (why != NULL) {
            js->p = at;
            return jfail(js, why);
        }
    }
    return true;
}
