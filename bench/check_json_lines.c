/*
 * bench/check_json_lines — the CTest check that a benchmark's output is
 * what bench/CMakeLists.txt promises: JSON lines on stdout, each one object
 * with a "bench" key naming the benchmark.
 *
 *   check_json_lines NAME PROGRAM [ARGS...]
 *
 * runs PROGRAM with its stdout read here (its stderr passes through),
 * copies each line to stdout, and checks each with the tests' strict parser
 * (tests/support/json.h). Exit status: 1 if a line is not such an object,
 * or PROGRAM printed none and did not skip (exit 77); else PROGRAM's own
 * (77 included, CTest's SKIP_RETURN_CODE), 1 if a signal ended it. So a
 * benchmark that fails, or whose output a tool could not read, fails its
 * test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/json.h"

/* Whether line (len bytes, no newline) is an object with "bench": name;
 * if not, says why on stderr. */
static int line_ok(const char *line, size_t len, const char *name, size_t n)
{
    char error[128];
    json_t *v = json_parse(line, len, error, sizeof error);
    const json_t *bench = v != NULL ? json_get(v, "bench") : NULL;
    int ok = 0;
    if (v == NULL)
        fprintf(stderr, "check_json_lines: line %zu is not JSON: %s\n", n, error);
    else if (v->kind != JSON_OBJECT)
        fprintf(stderr, "check_json_lines: line %zu is not a JSON object\n", n);
    else if (bench == NULL || bench->kind != JSON_STRING)
        fprintf(stderr, "check_json_lines: line %zu has no \"bench\" string\n", n);
    else if (strcmp(bench->string, name) != 0)
        fprintf(stderr, "check_json_lines: line %zu has \"bench\":\"%s\", not \"%s\"\n", n,
                bench->string, name);
    else
        ok = 1;
    json_free(v);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s NAME PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    int fd[2];
    if (pipe(fd) != 0) {
        perror("check_json_lines: pipe");
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("check_json_lines: fork");
        return 1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "check_json_lines: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    if (in == NULL) {
        perror("check_json_lines: fdopen");
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, lines = 0, bad = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) >= 0) {
        fwrite(line, 1, (size_t)len, stdout);
        fflush(stdout);
        if (len > 0 && line[len - 1] == '\n')
            len--;
        lines++;
        if (!line_ok(line, (size_t)len, name, lines))
            bad++;
    }
    free(line);
    fclose(in);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            perror("check_json_lines: waitpid");
            return 1;
        }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "check_json_lines: %s ended by signal %d (%s)\n", argv[2],
                WTERMSIG(status), strsignal(WTERMSIG(status)));
        return 1;
    }
    int rc = WEXITSTATUS(status);
    if (lines == 0 && rc != 77) { /* a skip may say why on stderr only */
        fprintf(stderr, "check_json_lines: %s printed nothing on stdout (exit status %d)\n",
                argv[2], rc);
        return 1;
    }
    if (bad > 0) {
        fprintf(stderr, "check_json_lines: %zu of %zu lines are not JSON objects with \"bench\":\"%s\"\n",
                bad, lines, name);
        return 1;
    }
    printf("check_json_lines: %zu lines, each a JSON object with \"bench\":\"%s\"; exit status %d\n",
           lines, name, rc);
    return rc;
}
