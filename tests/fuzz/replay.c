/*
 * tests/fuzz/replay.c — a fuzz target without libFuzzer: feeds it each file
 * named, and each file of each folder named (not recursing), in name
 * order, as libFuzzer does when given a corpus. Built in every build with
 * the target's sources, so that the seed corpora, and the regression
 * inputs kept among them, run in `ctest` (and under ASan) where there is
 * no clang. Exit status 0 when every input ran; a finding aborts.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int inputs;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0, n;
    do {
        if (size == cap && (data = realloc(data, cap = cap ? 2 * cap : 4096)) == NULL) {
            fprintf(stderr, "replay: no memory for %s\n", path);
            exit(2);
        }
        n = fread(data + size, 1, cap - size, f);
        size += n;
    } while (n > 0);
    fclose(f);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    /* a copy of exactly its size, so that ASan sees a read past its end */
    uint8_t *exact = malloc(size ? size : 1);
    if (exact == NULL)
        exit(2);
    memcpy(exact, data, size);
    free(data);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    inputs++;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            run_file(argv[i]);
            continue;
        }
        struct dirent **ents;
        int n = scandir(argv[i], &ents, NULL, by_name);
        if (n < 0) {
            perror(argv[i]);
            return 2;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], ents[k]->d_name);
            if (ents[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
                run_file(path);
            free(ents[k]);
        }
        free(ents);
    }
    fprintf(stderr, "replay: %d inputs ran\n", inputs);
    return inputs > 0 ? 0 : 2;
}
