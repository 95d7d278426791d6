/* The node settings an operator writes (NODE_*, CLUSTER_*), read from the configuration table
 * into struct cluster_config. Rule: only reading and checking; what the node knows only once it
 * runs (its id, the address it listens on, its capacities) is filled in by the caller. */
#include <errno.h>
#include <string.h>

#include "cluster/cluster.h"

#include "base/config.h"

int cluster_config_load(const struct config *cfg, struct cluster_config *cc, struct err *err)
{
    uint64_t beat, lost, nonces;
    memset(cc, 0, sizeof(*cc));
    if (config_get_u64(cfg, "NODE_HEARTBEAT_SECONDS", 5, 1, 3600, &beat, err) < 0 ||
        config_get_u64(cfg, "NODE_LOST_SECONDS", 30, 2, 86400, &lost, err) < 0 ||
        config_get_u64(cfg, "CLUSTER_NONCE_CACHE", 65536, 1024, 16 << 20, &nonces, err) < 0)
        return err->code;
    if (lost <= beat)
        return err_set(err, -EINVAL,
                       "NODE_LOST_SECONDS (%llu) must be longer than NODE_HEARTBEAT_SECONDS (%llu)",
                       (unsigned long long)lost, (unsigned long long)beat);
    const char *url = config_get(cfg, "NODE_URL");
    if (url && *url && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return err_set(err, -EINVAL, "NODE_URL '%.200s' must start with http:// or https://", url);
    const char *secret = config_get(cfg, "CLUSTER_SECRET");
    if (secret && *secret && strlen(secret) < 32)
        return err_set(err, -EINVAL, "CLUSTER_SECRET must be at least 32 characters");
    cc->node_url = url && *url ? url : NULL;
    cc->secret = secret;
    cc->heartbeat_ms = beat * 1000;
    cc->lost_ms = lost * 1000;
    cc->max_nonces = nonces;
    return 0;
}
