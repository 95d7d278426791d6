/* The notification settings an operator writes (NOTIFY_*), read from the configuration table
 * into struct notify_config. Rule: only reading and checking; the key is the caller's. */
#include "notify/notify.h"

#include <string.h>

#include "base/config.h"

int notify_config_load(const struct config *cfg, struct notify_config *nc, struct err *err)
{
    uint64_t u;
    memset(nc, 0, sizeof(*nc));
    if (config_get_u64(cfg, "NOTIFY_RETRY_SECONDS", NOTIFY_RETRY_BASE_MS / 1000, 1, 3600, &u, err) <
        0)
        return err->code;
    nc->retry_base_ms = (int64_t)u * 1000;
    if (config_get_u64(cfg, "NOTIFY_TEST_ALLOW_LOOPBACK", 0, 0, 1, &u, err) < 0)
        return err->code;
    nc->allow_loopback_http = u == 1;
    if (config_get_u64(cfg, "NOTIFY_VIEW_TOKEN", 1, 0, 1, &u, err) < 0)
        return err->code;
    nc->link_view_token = u == 1;
    return 0;
}
