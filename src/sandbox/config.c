/* The sandbox settings an operator writes (SANDBOX_*, EXEC_*), read from the configuration
 * table into struct sandbox_config. Rule: only reading and checking; nothing here starts or
 * touches a sandbox, so the commands that only list or build can use it too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"

#include "base/config.h"

int sandbox_config_load(const struct config *cfg, struct sandbox_config *sc, struct err *err)
{
    uint64_t v;
    sandbox_config_defaults(sc);
    sc->data_dir = cfg->data_dir;
    const char *tmpl = config_get(cfg, "SANDBOX_TEMPLATE");
    if (tmpl && strcmp(tmpl, "host") != 0 && strcmp(tmpl, "debian") != 0)
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE '%s' is not host or debian", tmpl);
    if (tmpl)
        sc->template_name = tmpl;
    sc->template_dir = config_get(cfg, "SANDBOX_TEMPLATE_DIR");
    if (sc->template_dir && sc->template_dir[0] != '/')
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE_DIR '%s' is not an absolute path",
                       sc->template_dir);
    sc->template_mirror = config_get(cfg, "SANDBOX_TEMPLATE_MIRROR");
    if (sc->template_mirror && strncmp(sc->template_mirror, "http://", 7) != 0 &&
        strncmp(sc->template_mirror, "https://", 8) != 0 &&
        strncmp(sc->template_mirror, "file:///", 8) != 0)
        return err_set(err, -EINVAL,
                       "SANDBOX_TEMPLATE_MIRROR '%s' is not an http://, https:// or file:/// URL",
                       sc->template_mirror);
    if (sc->template_mirror && strpbrk(sc->template_mirror, " \t\r\n\"'"))
        return err_set(err, -EINVAL, "SANDBOX_TEMPLATE_MIRROR '%s' holds a space or a quote",
                       sc->template_mirror);
    /* The mirror is named in logs and in what sandboxes are told: no password in it. */
    if (sc->template_mirror) {
        const char *host = strstr(sc->template_mirror, "://") + 3;
        const char *at = strchr(host, '@'), *slash = strchr(host, '/');
        if (at && (!slash || at < slash))
            return err_set(err, -EINVAL,
                           "SANDBOX_TEMPLATE_MIRROR must not carry a user or password; use a "
                           "mirror that needs none");
    }
#define GET(key, def, min, max, dst, scale)                                                        \
    do {                                                                                           \
        if (config_get_u64(cfg, key, (def) / (scale), min, max, &v, err) < 0)                      \
            return err->code;                                                                      \
        dst = v * (scale);                                                                         \
    } while (0)
    GET("SANDBOX_MEMORY_MB", sc->memory_bytes, 16, 1 << 24, sc->memory_bytes, 1 << 20);
    GET("SANDBOX_PIDS", sc->pids_max, 8, 1 << 22, sc->pids_max, 1);
    GET("SANDBOX_DISK_MB", sc->disk_bytes, 0, 1 << 24, sc->disk_bytes, 1 << 20);
    if (sc->disk_bytes && sc->disk_bytes < (64 << 20))
        return err_set(err, -EINVAL, "SANDBOX_DISK_MB must be 0 (no limit) or at least 64");
    GET("SANDBOX_TMP_MB", sc->tmp_bytes, 1, 1 << 20, sc->tmp_bytes, 1 << 20);
    GET("SANDBOX_MAX_RUNNING", sc->max_running, 1, 100000, sc->max_running, 1);
    GET("SANDBOX_MAX_RUNNING_PER_USER", sc->max_running_user, 1, 100000, sc->max_running_user, 1);
    GET("SANDBOX_POOL", sc->pool_size, 0, 1000, sc->pool_size, 1);
    GET("SANDBOX_STANDBY", sc->standby, 0, 1000, sc->standby, 1);
    GET("SANDBOX_DISK_PER_USER_MB", sc->disk_user_bytes, 0, 1ull << 32, sc->disk_user_bytes,
        1 << 20);
    GET("SANDBOX_DISK_TOTAL_MB", sc->disk_total_bytes, 0, 1ull << 32, sc->disk_total_bytes,
        1 << 20);
    GET("SANDBOX_DISK_RESERVE_MB", sc->disk_reserve_bytes, 0, 1ull << 32, sc->disk_reserve_bytes,
        1 << 20);
    const char *admit = config_get(cfg, "SANDBOX_DISK_ADMIT");
    if (admit && strcmp(admit, "thin") != 0 && strcmp(admit, "strict") != 0)
        return err_set(err, -EINVAL, "SANDBOX_DISK_ADMIT must be thin or strict, not '%s'", admit);
    sc->disk_strict = admit && strcmp(admit, "strict") == 0;
    GET("SANDBOX_IDLE_SECONDS", sc->idle_ms, 1, 30 * 24 * 3600, sc->idle_ms, 1000);
    GET("SANDBOX_TEMPLATE_RETRY_SECONDS", sc->template_retry_ms, 1, 3600, sc->template_retry_ms,
        1000);
    GET("SANDBOX_UID_BASE", sc->uid_base, 65536, 4294901759ull, sc->uid_base, 1);
    GET("SANDBOX_UID_RANGES", sc->uid_ranges, 1, 65535, sc->uid_ranges, 1);
    /* Slot N is uid_base + N * 65536; the last id of the last range stays below (uid_t)-1. */
    if (((uint64_t)sc->uid_ranges + 1) * 65536 + sc->uid_base > 0xffffffffull)
        return err_set(err, -EINVAL,
                       "SANDBOX_UID_BASE %u with SANDBOX_UID_RANGES %u goes past the last host id",
                       sc->uid_base, sc->uid_ranges);
    GET("EXEC_TIMEOUT_MAX_SECONDS", sc->exec_timeout_max, 1, 7 * 24 * 3600, sc->exec_timeout_max,
        1000);
    GET("EXEC_TIMEOUT_SECONDS", sc->exec_timeout_ms, 1, sc->exec_timeout_max / 1000,
        sc->exec_timeout_ms, 1000);
    GET("EXEC_OUTPUT_BYTES", sc->output_bytes, 1024, 64 << 20, sc->output_bytes, 1);
    sc->file_max_bytes = cfg->file_max_bytes; /* checked against MAX_REQUEST_BYTES */
#undef GET
    sc->cgroup_root = config_get(cfg, "SANDBOX_CGROUP_ROOT");
    if (config_get_u64(cfg, "SANDBOX_ALLOW_UNLIMITED", 0, 0, 1, &v, err) < 0)
        return err->code;
    sc->allow_unlimited = v == 1;
    const char *cpus = config_get(cfg, "SANDBOX_CPUS");
    if (cpus) {
        char *end;
        sc->cpus = strtod(cpus, &end);
        if (*end || sc->cpus < 0 || sc->cpus > 4096)
            return err_set(err, -EINVAL, "SANDBOX_CPUS '%s' is not a number of cores", cpus);
    }
    return 0;
}
