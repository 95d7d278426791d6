/* spawntime [--handover] N PROGRAM [ARG...]: run PROGRAM N times, one after another, and print
 * the wall time of each run (posix_spawn to waitpid) in milliseconds as a JSON array. The peers
 * of the sandbox benchmarks are timed with this instead of from Node.js, whose child_process adds
 * several milliseconds of its own to every process it starts. stdin, stdout and stderr are
 * /dev/null.
 *
 * With --handover each run is asked of a process started beforehand, which waits on a socket
 * pair: a byte there, the run, a byte back, timed from the first byte to the last. That is the
 * floor of any design that hands a command to a process already waiting (a sandbox's init): the
 * run plus a wakeup each way. */
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int run(posix_spawn_file_actions_t *fa, char **argv)
{
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], fa, NULL, argv, environ);
    if (r != 0) {
        fprintf(stderr, "spawntime: %s: %s\n", argv[0], strerror(r));
        return -1;
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "spawntime: %s failed (status %d)\n", argv[0], status);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bool handover = argc > 1 && strcmp(argv[1], "--handover") == 0;
    if (handover)
        argc--, argv++;
    if (argc < 3) {
        fprintf(stderr, "usage: spawntime [--handover] N PROGRAM [ARG...]\n");
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
    int sp[2] = {-1, -1};
    pid_t helper = 0;
    if (handover) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || (helper = fork()) < 0) {
            perror("spawntime");
            return 1;
        }
        if (helper == 0) { /* the waiting process: a run for each byte, a byte for each run */
            close(sp[0]);
            char b;
            while (read(sp[1], &b, 1) == 1) {
                b = run(&fa, argv + 2) == 0 ? 'y' : 'n';
                if (write(sp[1], &b, 1) != 1)
                    break;
            }
            _exit(0);
        }
        close(sp[1]);
    }
    printf("[");
    for (long i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (handover) {
            char c = 'r';
            if (write(sp[0], &c, 1) != 1 || read(sp[0], &c, 1) != 1 || c != 'y')
                return 1;
        } else if (run(&fa, argv + 2) < 0) {
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        printf("%s%.4f", i ? "," : "", ms);
    }
    printf("]\n");
    if (handover) {
        close(sp[0]);
        waitpid(helper, NULL, 0);
    }
    posix_spawn_file_actions_destroy(&fa);
    return 0;
}
