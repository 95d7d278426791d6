/* spawntime N PROGRAM [ARG...]: run PROGRAM N times, one after another, and print the wall time
 * of each run (posix_spawn to waitpid) in milliseconds as a JSON array. The peers of the sandbox
 * benchmarks are timed with this instead of from Node.js, whose child_process adds several
 * milliseconds of its own to every process it starts. stdin, stdout and stderr are /dev/null. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawntime N PROGRAM [ARG...]\n");
        return 2;
    }
    long n = strtol(argv[1], NULL, 10);
    if (n < 1 || n > 100000) {
        fprintf(stderr, "spawntime: N must be 1..100000\n");
        return 2;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
    printf("[");
    for (long i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pid_t pid;
        int r = posix_spawnp(&pid, argv[2], &fa, NULL, argv + 2, environ);
        if (r != 0) {
            fprintf(stderr, "spawntime: %s: %s\n", argv[2], strerror(r));
            return 1;
        }
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawntime: %s failed (status %d)\n", argv[2], status);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        printf("%s%.4f", i ? "," : "", ms);
    }
    printf("]\n");
    posix_spawn_file_actions_destroy(&fa);
    return 0;
}
