/*
 * base/options.c — the LMS_* options: one table (LMS_OPTIONS in base.h), parsed
 * once from the environment on first use.
 *
 * Invariant: after parsing, every field holds a valid value of its type — the
 * environment's when it parsed, else the table's default — and text[] holds
 * that value as text. Parsing runs under pthread_once; it reports bad values on
 * stderr directly (base_log would re-enter base_options()).
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

#include "base/base.h"

typedef enum { TYPE_size, TYPE_double, TYPE_int, TYPE_choice, TYPE_path } option_type_t;

typedef struct option {
    const char *field;   /* "sim_memory"; the variable is LMS_SIM_MEMORY */
    option_type_t type;
    const char *def;
    const char *choices; /* '|'-separated words, for choice */
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
static char var[OPTION_COUNT][40];    /* LMS_<FIELD> */
static char text[OPTION_COUNT][64];   /* each resolved value, as text */
static char paths[OPTION_COUNT][1024]; /* the values of paths, whole */
static const char *source[OPTION_COUNT]; /* "default" or "env" */
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

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

/* Parses s as option i's type into its field and text[i]; false changes nothing. */
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
        if (end == s || *end != '\0' || !isfinite(v))
            return false;
        *(double *)field = v;
        break;
    }
    case TYPE_int: {
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX)
            return false;
        *(long *)field = v;
        break;
    }
    case TYPE_choice:
        if (!parse_choice(s, o->choices, text[i], sizeof text[i]))
            return false;
        *(const char **)field = text[i];
        return true;
    case TYPE_path:
        if (strlen(s) >= sizeof paths[i])
            return false;
        snprintf(paths[i], sizeof paths[i], "%s", s);
        *(const char **)field = paths[i];
        break;
    }
    snprintf(text[i], sizeof text[i], "%s", s);
    return true;
}

static void parse_all(void)
{
    static const char *const type_words[] = {"a size such as 4GiB", "a number", "an integer", "",
                                             "a file path of less than 1024 bytes"};
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
        if (parse_value(i, env))
            source[i] = "env";
        else
            fprintf(stderr, "lms: warning: %s=%s is not valid (expected %s); using the default %s\n",
                    var[i], env, o->choices ? o->choices : type_words[o->type], o->def);
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
        fn(var[i], text[i], source[i], table[i].doc, arg);
}
