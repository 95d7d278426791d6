/* sandbox-init: PID 1 of a sandbox's pid namespace. It only reaps orphans; the server starts
 * every other process from outside. The namespace ends when the server sends it SIGKILL. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "helper.h"

int init_main(void)
{
    prctl(PR_SET_NAME, "sandbox-init"); /* not "memfd:sandbox-i" */
    /* Not dumpable: processes in the sandbox (no CAP_SYS_PTRACE) can neither trace PID 1 nor
     * open its /proc/1/fd, mem or environ. */
    prctl(PR_SET_DUMPABLE, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, 0);
    for (;;) {
        siginfo_t si;
        if (sigwaitinfo(&all, &si) == SIGCHLD)
            while (waitpid(-1, 0, WNOHANG) > 0)
                ;
    }
}
