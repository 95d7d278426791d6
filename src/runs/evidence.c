/* Evidence: images a run's agent marks as showing its work (a screenshot of its app), read whole
 * from its sandbox and kept in the run's directory on this node (evidence-<n>.<ext>, and
 * evidence.json: [{n, file, mime, bytes, caption}]), shown on the run's page and given by
 * get_result as image content. At most RUNS_EVIDENCE_MAX a run, each a whole PNG, JPEG, GIF or
 * WebP of at most RUNS_EVIDENCE_BYTES. */
#include "runs/runs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/fsops.h"
#include "sandbox/sandbox.h"

#define INDEX_NAME "evidence.json"

struct evidence_read {
    struct runs *e;
    char run_id[64];
    char dir[PATH_MAX];
    char *caption;
    char *path;
    runs_evidence_fn cb;
    void *ctx;
};

static void run_dir_of(const struct runs *e, const char *run_id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/runs/%s", e->data_dir, run_id);
}

/* The run's index (new reference; [] when it has none). */
static json_t *index_read(const char *dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/" INDEX_NAME, dir);
    json_t *a = json_load_file(p, 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        a = json_array();
    }
    return a;
}

static const char *ext_of(const char *mime)
{
    return strcmp(mime, "image/png") == 0    ? "png"
           : strcmp(mime, "image/jpeg") == 0 ? "jpg"
           : strcmp(mime, "image/gif") == 0  ? "gif"
           : strcmp(mime, "image/webp") == 0 ? "webp"
                                             : NULL;
}

/* data (n bytes) as dir/name, written whole or not at all */
static int write_whole(const char *dir, const char *name, const void *data, size_t n,
                       struct err *err)
{
    char tmp[PATH_MAX], final[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(final, sizeof(final), "%s/%s", dir, name);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(err, -errno, "cannot keep the image: %s", strerror(errno));
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)data + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int code = w < 0 ? -errno : -EIO;
            unlink(tmp);
            return err_set(err, code, "cannot keep the image: %s", strerror(-code));
        }
        off += (size_t)w;
    }
    if (rename(tmp, final) < 0) {
        int code = -errno;
        unlink(tmp);
        return err_set(err, code, "cannot keep the image: %s", strerror(-code));
    }
    return 0;
}

static void evidence_free(struct evidence_read *ev)
{
    free(ev->caption);
    free(ev->path);
    free(ev);
}

static void on_read(void *ctx, json_t *res, const struct err *ferr)
{
    struct evidence_read *ev = ctx;
    struct err err = {0};
    if (ferr) {
        ev->cb(ev->ctx, NULL, ferr);
        evidence_free(ev);
        return;
    }
    if (json_object_get(res, "error")) {
        err_set(&err, -(int)json_integer_value(json_object_get(res, "errno")), "%s",
                json_string_value(json_object_get(res, "error")));
        if (!err.code)
            err.code = -EIO;
        ev->cb(ev->ctx, NULL, &err);
        json_decref(res);
        evidence_free(ev);
        return;
    }
    const char *mime = json_string_value(json_object_get(res, "mime_type"));
    const char *b64 = json_string_value(json_object_get(res, "base64"));
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(res, "bytes"));
    if (json_is_true(json_object_get(res, "truncated")) || bytes > RUNS_EVIDENCE_BYTES) {
        err_set(&err, -E2BIG,
                "'%.200s' is larger than the %d KiB an image of evidence may be: "
                "save a smaller one",
                ev->path, RUNS_EVIDENCE_BYTES / 1024);
    } else if (!json_is_true(json_object_get(res, "image")) || !mime || !ext_of(mime) || !b64) {
        err_set(&err, -EINVAL, "'%.200s' is not a whole PNG, JPEG, GIF or WebP image", ev->path);
    }
    if (err.code) {
        ev->cb(ev->ctx, NULL, &err);
        json_decref(res);
        evidence_free(ev);
        return;
    }
    size_t blen = strlen(b64);
    _cleanup_free_ unsigned char *data = xmalloc(blen / 4 * 3 + 3);
    ssize_t n = base64_decode(b64, blen, data);
    json_t *index = index_read(ev->dir);
    unsigned num = (unsigned)json_array_size(index) + 1;
    char name[64];
    snprintf(name, sizeof(name), "evidence-%u.%s", num, ext_of(mime));
    json_t *item = json_pack("{s:i, s:s, s:s, s:I, s:s?}", "n", (int)num, "file", name, "mime",
                             mime, "bytes", (json_int_t)(n > 0 ? n : 0), "caption", ev->caption);
    int rc = num > RUNS_EVIDENCE_MAX
                 ? err_set(&err, -EMFILE, "this run has %d images of evidence, the most it may",
                           RUNS_EVIDENCE_MAX)
             : n <= 0 ? err_set(&err, -EINVAL, "the image could not be read")
                      : write_whole(ev->dir, name, data, (size_t)n, &err);
    if (rc == 0) {
        json_array_append(index, item);
        char *text = json_dumps(index, JSON_COMPACT);
        rc = write_whole(ev->dir, INDEX_NAME, text, strlen(text), &err);
        free(text);
    }
    json_decref(index);
    json_decref(res);
    if (rc < 0) {
        json_decref(item);
        ev->cb(ev->ctx, NULL, &err);
        evidence_free(ev);
        return;
    }
    char line[300];
    snprintf(line, sizeof(line), "Evidence %u%s%.200s", num, ev->caption ? ": " : "",
             ev->caption ? ev->caption : "");
    runs_note(ev->e, ev->run_id, "evidence", line, json_deep_copy(item));
    log_info("run evidence run=%s n=%u bytes=%zd", ev->run_id, num, n);
    ev->cb(ev->ctx, item, NULL);
    evidence_free(ev);
}

int runs_add_evidence(struct runs *e, const char *user_id, const char *run_id, const char *path,
                      const char *caption, runs_evidence_fn cb, void *ctx, struct err *err)
{
    struct run *r = runs_find(e, run_id);
    if (!r || !r->sbx || r->ph_final || strcmp(r->user_id, user_id) != 0)
        return err_set(err, -ENOENT, "run '%.64s' is not working here", run_id);
    struct evidence_read *ev = xcalloc(1, sizeof(*ev));
    ev->e = e;
    snprintf(ev->run_id, sizeof(ev->run_id), "%s", run_id);
    run_dir_of(e, run_id, ev->dir, sizeof(ev->dir));
    json_t *index = index_read(ev->dir);
    size_t have = json_array_size(index);
    json_decref(index);
    if (have >= RUNS_EVIDENCE_MAX) {
        evidence_free(ev);
        return err_set(err, -EMFILE, "this run has %d images of evidence, the most it may",
                       RUNS_EVIDENCE_MAX);
    }
    ev->caption = caption && *caption ? xstrdup(caption) : NULL;
    ev->path = xstrdup(path);
    ev->cb = cb;
    ev->ctx = ctx;
    struct fsop_request req = {.kind = FSOP_READ,
                               .path = ev->path,
                               .path_len = strlen(ev->path),
                               .cwd = "/workspace",
                               .max_bytes = RUNS_EVIDENCE_BYTES + 1};
    if (sandbox_fs(r->sbx, &req, on_read, ev, err) < 0) {
        evidence_free(ev);
        return err->code ? err->code : -EIO;
    }
    return 0;
}

json_t *runs_evidence(struct runs *e, const char *run_id)
{
    char dir[PATH_MAX];
    run_dir_of(e, run_id, dir, sizeof(dir));
    return index_read(dir);
}

int runs_evidence_file(struct runs *e, const char *run_id, unsigned n, char *path, size_t cap,
                       char mime[32])
{
    char dir[PATH_MAX];
    run_dir_of(e, run_id, dir, sizeof(dir));
    json_t *index = index_read(dir);
    json_t *item = n >= 1 ? json_array_get(index, n - 1) : NULL;
    const char *file = json_string_value(json_object_get(item, "file"));
    const char *m = json_string_value(json_object_get(item, "mime"));
    int rc = file && m ? 0 : -ENOENT;
    if (rc == 0) {
        snprintf(path, cap, "%s/%s", dir, file);
        snprintf(mime, 32, "%s", m);
    }
    json_decref(index);
    return rc;
}

char *runs_evidence_data(struct runs *e, const char *run_id, unsigned n, size_t *len, char mime[32])
{
    char path[PATH_MAX];
    if (runs_evidence_file(e, run_id, n, path, sizeof(path), mime) < 0)
        return NULL;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    char *data = xmalloc(RUNS_EVIDENCE_BYTES + 1);
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, data + got, RUNS_EVIDENCE_BYTES + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got > RUNS_EVIDENCE_BYTES)
            break;
    }
    if (got == 0 || got > RUNS_EVIDENCE_BYTES) {
        free(data);
        return NULL;
    }
    *len = got;
    return data;
}
