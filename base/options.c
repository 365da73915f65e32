/*
 * base/options.c — the LMS_* options: one table (LMS_OPTIONS in base.h), parsed
 * once from the environment on first use.
 *
 * Invariant: after parsing, every field holds a valid value of its type — the
 * environment's when it parsed and lies in its range, else the table's
 * default — and shown[] holds that value as text (a path whole, however long:
 * its copy is allocated, and kept for the process). Parsing runs under
 * pthread_once; it reports bad values on stderr directly (base_log would
 * re-enter base_options()), one line naming the variable, what was expected
 * and the default kept.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"

typedef enum {
    TYPE_size,
    TYPE_double,
    TYPE_int,
    TYPE_bool,
    TYPE_choice,
    TYPE_path
} option_type_t;

typedef struct option {
    const char *field;   /* "sim_memory"; the variable is LMS_SIM_MEMORY */
    option_type_t type;
    const char *def;
    const char *choices; /* '|'-separated words, for choice; "lo..hi", for int and double */
    const char *doc;
    size_t offset;       /* of the field in base_options_t */
} option_t;

static const option_t table[] = {
#define OPTION_ROW(field, type, def, choices, doc) \
    {#field, TYPE_##type, def, choices, doc, offsetof(base_options_t, field)},
    LMS_OPTIONS(OPTION_ROW)
#undef OPTION_ROW
};
#define OPTION_COUNT (sizeof table / sizeof *table)

static base_options_t options;
static char var[OPTION_COUNT][40];       /* LMS_<FIELD> */
static char text[OPTION_COUNT][64];      /* each resolved value but a path's, as text */
static const char *shown[OPTION_COUNT];  /* each resolved value as text: text[i], or the path */
static const char *source[OPTION_COUNT]; /* "default" or "env" */
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

/* base_expand_path's result written to out (NULL: only counted); its length. */
static size_t expand_path(const char *path, const char *pid, char *out)
{
    size_t len = 0;
    for (const char *s = path; *s != '\0'; s++) {
        const char *piece = s;
        size_t k = 1;
        if (s[0] == '%' && s[1] == 'p')
            piece = pid, k = strlen(pid), s++;
        else if (s[0] == '%' && s[1] == '%')
            s++;
        if (out != NULL)
            memcpy(out + len, piece, k);
        len += k;
    }
    return len;
}

bool base_expand_path(const char *path, char *out, size_t n)
{
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    size_t len = expand_path(path, pid, NULL);
    if (len >= n)
        return false;
    expand_path(path, pid, out);
    out[len] = '\0';
    return true;
}

bool base_parse_size(const char *s, uint64_t *out)
{
    static const char units[] = "KMGTP";
    if (s == NULL)
        return false;
    while (isspace((unsigned char)*s))
        s++;
    /* digits, optionally a fraction: no sign, exponent, hex or inf */
    size_t digits = strspn(s, "0123456789");
    if (s[digits] == '.')
        digits += 1 + strspn(s + digits + 1, "0123456789");
    if (digits == 0 || (digits == 1 && *s == '.'))
        return false;
    char *end;
    double value = strtod(s, &end);
    if (end != s + digits)
        return false;
    while (isspace((unsigned char)*end))
        end++;
    double scale = 1;
    if (*end != '\0') {
        const char *unit = strchr(units, toupper((unsigned char)*end));
        if (unit == NULL && toupper((unsigned char)*end) != 'B')
            return false;
        if (unit != NULL) {
            scale = ldexp(1.0, 10 * (int)(unit - units + 1));
            end++;
            if (*end == 'i' || *end == 'I')
                end++;
        }
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (*end != '\0')
        return false;
    double bytes = value * scale;
    if (bytes >= 18446744073709551616.0 || bytes != floor(bytes)) /* 2^64; whole bytes */
        return false;
    *out = (uint64_t)bytes;
    return true;
}

char *base_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    double value = (double)bytes;
    while (value >= 1024 && u + 1 < sizeof units / sizeof *units) {
        value /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", value, units[u]);
    return buf;
}

/* The word of choices that s names (ignoring case), copied into word; false if none. */
static bool parse_choice(const char *s, const char *choices, char *word, size_t len)
{
    size_t n = strlen(s);
    for (const char *w = choices; *w != '\0';) {
        size_t wlen = strcspn(w, "|");
        if (wlen == n && n < len && strncasecmp(w, s, n) == 0) {
            memcpy(word, w, n);
            word[n] = '\0';
            return true;
        }
        w += wlen + (w[wlen] == '|');
    }
    return false;
}

/* Whether v lies in range, "lo..hi" (either end may be empty: unbounded);
 * NULL is any value. */
static bool in_range(double v, const char *range)
{
    if (range == NULL)
        return true;
    char *end;
    if (range[0] != '.' && v < strtod(range, &end))
        return false;
    const char *hi = strstr(range, "..") + 2;
    return *hi == '\0' || v <= strtod(hi, &end);
}

/* 0/1 and their words, ignoring case; -1 if s is none of them. */
static int parse_bool(const char *s)
{
    static const char *const words[][2] = {
        {"0", "1"}, {"false", "true"}, {"no", "yes"}, {"off", "on"},
    };
    for (size_t w = 0; w < sizeof words / sizeof *words; w++)
        for (int b = 0; b < 2; b++)
            if (strcasecmp(s, words[w][b]) == 0)
                return b;
    return -1;
}

/* Parses s as option i's type into its field and shown[i]; false changes nothing. */
static bool parse_value(size_t i, const char *s)
{
    const option_t *o = &table[i];
    void *field = (char *)&options + o->offset;
    char *end;
    switch (o->type) {
    case TYPE_size: {
        uint64_t v;
        if (!base_parse_size(s, &v))
            return false;
        *(uint64_t *)field = v;
        break;
    }
    case TYPE_double: {
        double v = strtod(s, &end);
        if (end == s || *end != '\0' || !isfinite(v) || !in_range(v, o->choices))
            return false;
        *(double *)field = v == 0 ? 0 : v; /* -0 is 0 */
        break;
    }
    case TYPE_int: {
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX ||
            !in_range((double)v, o->choices))
            return false;
        *(long *)field = v;
        break;
    }
    case TYPE_bool: {
        int v = parse_bool(s);
        if (v < 0)
            return false;
        *(bool *)field = v;
        s = v ? "1" : "0";
        break;
    }
    case TYPE_choice:
        if (!parse_choice(s, o->choices, text[i], sizeof text[i]))
            return false;
        *(const char **)field = shown[i] = text[i];
        return true;
    case TYPE_path: {
        /* a copy, kept for the process (the one it replaces is a default's: "") */
        size_t n = strlen(s) + 1;
        char *copy = n > 1 ? base_meta_alloc(n) : NULL;
        if (n > 1 && copy == NULL)
            return false;
        if (copy != NULL)
            memcpy(copy, s, n);
        *(const char **)field = shown[i] = copy != NULL ? copy : "";
        return true;
    }
    }
    snprintf(text[i], sizeof text[i], "%s", s);
    shown[i] = text[i];
    return true;
}

/* A range "lo..hi" in words: " of lo or more", " of hi or less", " from lo to hi", or "". */
static void range_words(const char *range, char *buf, size_t len)
{
    const char *dots = range != NULL ? strstr(range, "..") : NULL;
    if (dots == NULL)
        snprintf(buf, len, "%s", "");
    else if (dots[2] == '\0')
        snprintf(buf, len, " of %.*s or more", (int)(dots - range), range);
    else if (dots == range)
        snprintf(buf, len, " of %s or less", dots + 2);
    else
        snprintf(buf, len, " from %.*s to %s", (int)(dots - range), range, dots + 2);
}

/* What option o's type accepts, for the warning about a value it does not. */
static void expected(const option_t *o, char *buf, size_t len)
{
    char range[64];
    range_words(o->choices, range, sizeof range);
    switch (o->type) {
    case TYPE_size:
        snprintf(buf, len, "a size such as 4GiB, less than 16 EiB");
        return;
    case TYPE_double:
        snprintf(buf, len, "a finite number%s", range);
        return;
    case TYPE_int:
        snprintf(buf, len, "an integer%s", o->choices != NULL ? range : " in int's range");
        return;
    case TYPE_bool:
        snprintf(buf, len, "0 or 1 (or false/true, no/yes, off/on)");
        return;
    case TYPE_choice:
        snprintf(buf, len, "%s", o->choices);
        return;
    case TYPE_path:
        snprintf(buf, len, "a file path (no host memory to keep it)");
        return;
    }
}

static void parse_all(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_t *o = &table[i];
        size_t n = (size_t)snprintf(var[i], sizeof var[i], "LMS_%s", o->field);
        for (size_t c = 0; c < n; c++)
            var[i][c] = (char)toupper((unsigned char)var[i][c]);
        if (!parse_value(i, o->def))
            abort(); /* a default that does not parse is a bug in LMS_OPTIONS */
        source[i] = "default";
        const char *env = getenv(var[i]);
        if (env == NULL || *env == '\0')
            continue;
        if (parse_value(i, env)) {
            source[i] = "env";
            continue;
        }
        char want[96];
        expected(o, want, sizeof want);
        fprintf(stderr,
                "lms: warning: %s=%.200s%s is not valid (expected %s); using the default %s\n",
                var[i], env, strlen(env) > 200 ? "..." : "", want, o->def[0] ? o->def : "(none)");
    }
}

const base_options_t *base_options(void)
{
    pthread_once(&parse_once, parse_all);
    return &options;
}

void base_options_each(void (*fn)(const char *var, const char *value, const char *source,
                                  const char *doc, void *arg),
                       void *arg)
{
    base_options();
    for (size_t i = 0; i < OPTION_COUNT; i++)
        fn(var[i], shown[i], source[i], table[i].doc, arg);
}
