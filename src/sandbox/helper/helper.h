#pragma once
/* The sandbox helper: a small static program embedded in the server and run from a sealed
 * memfd. argv[0] selects the role. */

/* "sandbox-init": PID 1 of a sandbox; reaps orphans and starts the commands the server sends
 * on its control socket (protocol in init.c), until killed. */
int init_main(void);
/* "sandbox-listen PORT...": open 127.0.0.1:PORT for each port in a sandbox's network namespace
 * (listen.c). */
int listen_main(int nports, char **ports);
/* "sandbox-fs": a sandbox's file worker, for the file tools: joins it once and carries out the
 * operations the server sends (fs.c). */
int fs_main(void);
/* "sandbox-agent PROGRAM PORT IDLE_S MODEL [SESSION]": a run's agent when OpenCode is kept warm
 * in the sandbox; "sandbox-keeper ...": the process that keeps it (agent.c). The init runs these
 * two from its own image when a command names them. */
int agent_main(int argc, char **argv);
int keeper_main(int argc, char **argv);
