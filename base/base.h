/*
 * base/ — what every layer of lms may use, and nothing else: status and error
 * messages, logging, the options table, host metadata, the clock. base/
 * calls only libc and lms's private jemalloc.
 *
 * Errors: a failing function records a message for its thread with
 * base_fail() and returns the status it is given, so a failure path reads
 *     return base_fail(LMS_ERR_INVALID, "dev_map: offset %zu not aligned", off);
 * The public lms_last_error() returns that message.
 *
 * Options: one table, LMS_OPTIONS below (variable, type, default, one-line
 * doc), from which the parsed struct, the parser and `lms-info --options` all
 * come. The environment is read once, on first use; a value that does not
 * parse, or is outside its type's range, is reported on stderr naming the
 * variable, and the default is kept. A variable set to "" counts as unset.
 *
 * Host metadata: lms's own tables are allocated with base_meta_*, from one
 * arena of a private jemalloc linked into lms (base/meta.c), never with the
 * program's malloc, which lms leaves alone. The build fails when an object of
 * lms's sources calls the C library's malloc, free or their kin; the few that
 * must (memory the C library or the C++ runtime hands over) are listed with
 * their reasons in CMakeLists.txt (LMS_LIBC_MALLOC_ALLOWED).
 */
#ifndef LMS_BASE_H
#define LMS_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lms.h"

#define BASE_KiB ((uint64_t)1 << 10)
#define BASE_MiB ((uint64_t)1 << 20)
#define BASE_GiB ((uint64_t)1 << 30)

/* ---- errors and logging ------------------------------------------------- */

/* Records "fmt..." as this thread's last error and returns status. */
lms_status_t base_fail(lms_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

typedef enum base_log_level {
    BASE_LOG_ERROR,
    BASE_LOG_WARN,
    BASE_LOG_INFO,
    BASE_LOG_DEBUG,
} base_log_level_t;

/* Prints "lms: <level>: message" to stderr when level <= LMS_LOG. */
void base_log(base_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- options ------------------------------------------------------------ */

/*
 * X(field, type, default, choices, doc)
 *   field:   member of base_options_t; the variable is LMS_<FIELD upper case>
 *   type:    size   bytes; K/M/G/T suffixes, binary
 *            double a finite number
 *            int    a decimal integer
 *            bool   0 or 1 (also false/true, no/yes, off/on, any case)
 *            choice one of the words of choices (any case)
 *            path   a file name of any length ("" when not set)
 *   choices: for choice, the allowed words separated by '|'; for int and
 *            double, the allowed range "lo..hi", inclusive, either end left
 *            out where unbounded ("0.." is non-negative), NULL for any int
 *            (within int's range) or any finite double; else NULL
 */
#define LMS_OPTIONS(X)                                                                       \
    X(backend, choice, "auto", "auto|cuda|sim",                                              \
      "device backend: cuda when a device is present, else sim")                            \
    X(device, int, "0", "0..", "CUDA device ordinal")                                        \
    X(log, choice, "warn", "error|warn|info|debug", "messages printed on stderr")            \
    X(device_checks, choice, "auto", "auto|handles|full",                                    \
      "lms's checks of its own device calls: handles only (no lock on copies), or full "    \
      "(every range and mapping); auto = full in Debug and sanitizer builds")               \
    X(sim_memory, size, "4GiB", NULL, "memory of the simulated device")                      \
    X(sim_granularity, size, "2MiB", NULL, "block size of the simulated device")            \
    X(sim_h2d_gbps, double, "0", "0..",                                                      \
      "simulated host-to-device bandwidth, GB/s; 0 = no limit")                              \
    X(sim_d2h_gbps, double, "0", "0..",                                                      \
      "simulated device-to-host bandwidth, GB/s; 0 = no limit")                              \
    X(sim_vmm_us_per_mib, double, "0", "0..",                                                \
      "simulated host time of an unmap or a set_access, us per MiB; 0 = none")             \
    X(sim_set_access_d2h_us_per_mib, double, "0", "0..",                                     \
      "simulated host time of a set_access while a D2H copy runs, us per MiB; 0 = as "     \
      "LMS_SIM_VMM_US_PER_MIB (Note [VMM beside copies] in swap/prefetch.c)")                \
    X(device_limit, size, "0", NULL,                                                         \
      "device memory lms may use; 0 = free memory less an eighth of it, at most 512 MiB")  \
    X(host_limit, size, "0", NULL,                                                           \
      "pinned host memory to swap to; 0 = half the memory of the GPU's NUMA node "          \
      "(the machine's, where it has one node)")                                             \
    X(va_reserve, size, "0", NULL, "address range reserved; 0 = 4 x (device + host limit)") \
    X(large_threshold, size, "0", NULL,                                                      \
      "allocations this large get whole chunks of their own; 0 = 8 chunks")                \
    X(preallocate, bool, "0", NULL, "1: create every device block of the limit at init")    \
    X(swap, bool, "1", NULL,                                                                 \
      "0: no swapping: the device limit is hard and lms_malloc backs memory at once")      \
    X(reclaim_low, size, "0", NULL,                                                          \
      "the reclaim thread evicts when free device memory falls below this; 0 = limit / 32") \
    X(reclaim_high, size, "0", NULL,                                                         \
      "and stops once this much is free; 0 = limit / 16, at least low + 1 chunk")           \
    X(thread_cache, size, "1MiB", NULL,                                                      \
      "small freed memory each thread keeps for its own reuse, lock-free; 0 = none")       \
    X(swap_piece, size, "0", NULL,                                                            \
      "bytes a swap remaps and copies as one step, overlapping the next; 0 = 16 MiB")      \
    X(policy, choice, "schedule", "schedule|lru",                                            \
      "eviction: by the learnt iteration schedule (Belady, with prefetch), or LRU only")  \
    X(evict_ahead, bool, "1", NULL,                                                          \
      "evict the schedule's victims early enough for the D2H link (Note [Eviction ahead])")  \
    X(evicted, choice, "auto", "auto|unmapped|host",                                         \
      "an evicted chunk's addresses: unmapped (a kernel lms did not see touch it faults), or " \
      "host: mapped to its host copy, read over the link (not run on a GPU yet); "          \
      "auto = unmapped until a card has measured host (lms-info says)")                      \
    X(stats, bool, "0", NULL, "1: print lms_stats() on stderr at exit, or at lms_shutdown") \
    X(enable, bool, "1", NULL,                                                               \
      "0: the CUDA calls liblms.so interposes go straight to CUDA, as with no preload")     \
    X(pin_smaller_than, size, "0", NULL,                                                     \
      "interposed allocations smaller than this stay resident for their life; 0 = none")   \
    X(unknown_launch, choice, "auto", "auto|fail|launch",                                   \
      "a launch whose parameter layout cannot be learnt: fail it, or launch it unseen; "    \
      "auto = fail while swapping, launch with LMS_SWAP=0")                                 \
    X(trace_accesses, path, "", NULL,                                                        \
      "file the interposer writes its allocations and accesses to (docs/trace-format.md); " \
      "%p in it: the process id")                                                           \
    X(trace, path, "", NULL,                                                                 \
      "file lms writes a timeline of its swaps and the device's work to, for Perfetto "     \
      "(docs/timeline-format.md); %p in it: the process id (a file per process); "          \
      "lms_init fails if it cannot be written")

#define BASE_OPTION_CTYPE_size uint64_t
#define BASE_OPTION_CTYPE_double double
#define BASE_OPTION_CTYPE_int long
#define BASE_OPTION_CTYPE_bool bool
#define BASE_OPTION_CTYPE_choice const char * /* one of the choices, as in the table */
#define BASE_OPTION_CTYPE_path const char *   /* "" when not set */

typedef struct base_options {
#define BASE_OPTION_FIELD(field, type, def, choices, doc) BASE_OPTION_CTYPE_##type field;
    LMS_OPTIONS(BASE_OPTION_FIELD)
#undef BASE_OPTION_FIELD
} base_options_t;

/* The options, parsed from the environment on the first call. Thread-safe. */
const base_options_t *base_options(void);

/* Calls fn once per option, in table order, with its variable name, the
 * resolved value as text, where it came from ("default" or "env") and its doc. */
void base_options_each(void (*fn)(const char *var, const char *value, const char *source,
                                  const char *doc, void *arg),
                       void *arg);

/* Parses "4GiB", "512M", "2m", "1.5G", "4096" into bytes (suffixes are binary:
 * K = 1024). Returns false, leaving *out unchanged, on garbage, on a fraction
 * of a byte ("0.3K"), or on overflow. */
bool base_parse_size(const char *text, uint64_t *out);

/* A file name setting (LMS_TRACE, LMS_TRACE_ACCESSES) as this process uses
 * it: each "%p" becomes the process id and "%%" a "%", so that the many
 * processes a launcher such as torchrun starts each write a file of their
 * own; any other "%" stays. False, *out unchanged, if the result does not
 * fit in n bytes. */
bool base_expand_path(const char *path, char *out, size_t n);

/* Formats bytes as "4.00 GiB" into buf; returns buf. */
char *base_format_size(uint64_t bytes, char *buf, size_t len);

/* ---- host metadata ------------------------------------------------------ */

/*
 * Memory for lms's own host-side tables (chunk tables, slabs, lists), from
 * one private jemalloc arena created on first use, never from the program's
 * malloc. Thread-safe. Each returns NULL when no memory is left (callers turn
 * that into LMS_ERR_OUT_OF_MEMORY). Memory is aligned as malloc's is; a
 * request for 0 bytes returns a unique pointer to free later.
 */
void *base_meta_alloc(size_t size);

/* n * size bytes, zeroed; NULL also when n * size overflows. */
void *base_meta_calloc(size_t n, size_t size);

/* size bytes, zeroed, aligned to align (a power of two). */
void *base_meta_calloc_aligned(size_t size, size_t align);

/* Resizes p (NULL: as base_meta_alloc), keeping its first min(old, new)
 * bytes. On failure returns NULL, and p is unchanged and still the caller's. */
void *base_meta_realloc(void *p, size_t size);

/* Frees p, which came from base_meta_*; NULL is a no-op. */
void base_meta_free(void *p);

/* ---- clock -------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t base_now_ns(void);

/* Sleeps until base_now_ns() >= deadline_ns. */
void base_sleep_until_ns(uint64_t deadline_ns);

/* The CLOCK_MONOTONIC time ns from now, as the deadline of a timed wait on
 * a condition variable made to wait on that clock (pthread_condattr_setclock):
 * a deadline on the wall clock moves with it, and a step back of the clock
 * (NTP, an administrator) stalls the wait for as long. */
struct timespec base_deadline_in(uint64_t ns);

/* ---- the machine ---------------------------------------------------------- */

/* The host CPU's model name (/proc/cpuinfo) into buf, or "unknown": what
 * lms-info and the benchmarks print beside their measurements. */
void base_host_cpu(char *buf, size_t len);

#endif /* LMS_BASE_H */
