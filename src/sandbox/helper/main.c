/* sandbox-helper: dispatch on argv[0]. Built static, so it needs nothing from the filesystem
 * it runs in, and it never holds anything of the server's memory. */
#include <string.h>

#include "helper.h"

int main(int argc, char **argv)
{
    if (argc > 0 && strcmp(argv[0], "sandbox-listen") == 0)
        return listen_main(argc - 1, argv + 1);
    if (argc > 0 && strcmp(argv[0], "sandbox-init") == 0)
        return init_main();
    if (argc > 0 && strcmp(argv[0], "sandbox-fs") == 0)
        return fs_main();
    if (argc > 0 && strcmp(argv[0], "sandbox-agent") == 0)
        return agent_main(argc, argv);
    if (argc > 0 && strcmp(argv[0], "sandbox-keeper") == 0)
        return keeper_main(argc, argv);
    return 127;
}
