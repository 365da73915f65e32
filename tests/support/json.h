/*
 * tests/support/json.h — a small strict JSON parser (RFC 8259) for tests
 * that read what lms writes (the LMS_TRACE timeline). Not for lms itself.
 *
 * A parsed value is a tree of json_t; json_free frees it. Numbers are
 * doubles; strings are unescaped (\uXXXX as UTF-8); objects keep their
 * keys in order, duplicates included.
 */
#ifndef LMS_TEST_JSON_H
#define LMS_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_kind {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_kind_t;

typedef struct json {
    json_kind_t kind;
    bool boolean;
    double number;
    char *string;        /* JSON_STRING */
    size_t n;            /* JSON_ARRAY, JSON_OBJECT: elements */
    struct json *items;  /* their values */
    char **keys;         /* JSON_OBJECT: their keys */
} json_t;

/* text[0..len) as exactly one JSON value, with whitespace around it; NULL
 * if it is anything else, and then error says what and where (byte offset). */
json_t *json_parse(const char *text, size_t len, char *error, size_t error_len);

void json_free(json_t *v);

/* The value of key in object v (the first, if repeated); NULL if v is not
 * an object or has no such key. */
const json_t *json_get(const json_t *v, const char *key);

#endif
