/*
 * interpose/signature.c — pointers to const in a demangled signature
 * (signature.h).
 *
 * The parameter list is the parenthesised list that ends the signature; the
 * name before it may hold parentheses of its own (a lambda's
 * "{lambda(int)#1}", "(anonymous namespace)"), which matching from the end
 * steps over. Parameters are split at the commas outside every bracket
 * ((), [], {}, <>). A signature whose brackets do not balance is not read.
 */
#include <string.h>

#include "interpose/signature.h"

/* Whether [a, *end) ends with word (preceded by a space, '*' or the start);
 * if so, *end moves to before it and the spaces before that. */
static bool strip_word(const char *a, const char **end, const char *word)
{
    size_t w = strlen(word);
    const char *e = *end;
    if ((size_t)(e - a) < w || memcmp(e - w, word, w) != 0)
        return false;
    e -= w;
    if (e > a && e[-1] != ' ' && e[-1] != '*')
        return false;
    while (e > a && e[-1] == ' ')
        e--;
    *end = e;
    return true;
}

/* Whether the parameter [a, e) is a pointer to const. */
static bool pointer_to_const(const char *a, const char *e)
{
    while (e > a && e[-1] == ' ')
        e--;
    while (strip_word(a, &e, "__restrict__") || strip_word(a, &e, "__restrict") ||
           strip_word(a, &e, "restrict"))
        ;
    if (e == a || e[-1] != '*')
        return false;
    e--;
    while (e > a && e[-1] == ' ')
        e--;
    bool is_const = false;
    for (bool more = true; more;) {
        more = strip_word(a, &e, "volatile");
        if (strip_word(a, &e, "const"))
            more = is_const = true;
    }
    return is_const;
}

/* The bracket depth change of c. */
static int depth_of(char c)
{
    switch (c) {
    case '(': case '[': case '{': case '<': return 1;
    case ')': case ']': case '}': case '>': return -1;
    default: return 0;
    }
}

/* Walks the list [a, e): counts its parameters and, with out, sets each.
 * -1 when the brackets do not balance. */
static long walk(const char *a, const char *e, bool *out)
{
    const char *p = a;
    while (p < e && *p == ' ')
        p++;
    if (p == e || (e - p == 4 && memcmp(p, "void", 4) == 0))
        return 0;
    long n = 0;
    int depth = 0;
    const char *start = p;
    for (; p <= e; p++) {
        if (p < e && (depth += depth_of(*p)) < 0)
            return -1;
        if (p == e || (*p == ',' && depth == 0)) {
            if (out != NULL)
                out[n] = pointer_to_const(start, p);
            n++;
            start = p + 1;
        }
    }
    return depth == 0 ? n : -1;
}

bool signature_read_only(const char *sig, size_t n, bool *read_only)
{
    if (sig == NULL)
        return false;
    const char *end = sig + strlen(sig);
    while (end > sig && end[-1] == ' ')
        end--;
    if (end == sig || end[-1] != ')')
        return false;
    /* the '(' that matches the last ')' */
    const char *open = end - 1;
    for (int depth = 0; open >= sig; open--) {
        if (*open == ')')
            depth++;
        else if (*open == '(' && --depth == 0)
            break;
    }
    if (open < sig)
        return false;
    long count = walk(open + 1, end - 1, NULL);
    if (count < 0 || (size_t)count != n)
        return false;
    (void)walk(open + 1, end - 1, read_only);
    return true;
}
