/* A main() for the fuzz targets that replays inputs without libFuzzer, as libFuzzer's own
 * standalone driver and SQLite's fuzzcheck do: `make test` links each target with this file and
 * the sanitized library it already built (gcc, ASan and UBSan), so the corpora are replayed
 * without compiling the whole source a third time with coverage instrumentation. `make fuzz`
 * still builds the targets with libFuzzer to search for new inputs.
 *
 * Usage: fuzz_NAME [-flag ...] PATH...  Each PATH is a file or a directory whose regular files
 * are inputs; arguments starting with '-' (libFuzzer's options) are ignored, so both builds take
 * the same command line. A failing input aborts (the target's own checks or a sanitizer) after
 * its path is printed; otherwise the last line is "N inputs ok". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX (16u << 20) /* larger inputs are a corpus mistake, not a test */

static size_t ninputs;

static int replay_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > INPUT_MAX) {
        fprintf(stderr, "%s: larger than %u bytes\n", path, INPUT_MAX);
        close(fd);
        return -1;
    }
    /* an exact-size copy, so that ASan sees a read past the end of the input */
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *data = malloc(size ? size : 1);
    while (data && got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!data || got != size) {
        fprintf(stderr, "%s: short read\n", path);
        free(data);
        return -1;
    }
    fprintf(stderr, "input %s\n", path);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    ninputs++;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name), rc = 0;
    if (n < 0) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (names[i]->d_name[0] != '.' &&
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name) < (int)sizeof(path) &&
            stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) < 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (argv[i][0] == '-')
            continue;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(st.st_mode) ? replay_dir(argv[i]) < 0 : replay_file(argv[i]) < 0) {
            rc = 1;
        }
    }
    printf("%zu inputs ok\n", ninputs);
    return rc;
}
