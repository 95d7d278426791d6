/* File operations confined to a root directory. Each test gets a fresh temporary directory
 * holding root/ (with root/workspace, the cwd) and, next to it, outside/secret, which no
 * operation may reach: an inotify watch on outside/ catches any open, read or change. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ids.h"
#include "harness.h"
#include "sandbox/fsops.h"

#define SECRET "top secret, never to be read\n"

struct fx {
    char base[256];
    char root[300];
    char outside[300];
    int root_fd;
    int inotify_fd;
};

static const char *const default_protected[] = {"/", "/workspace", NULL};

static void fx_setup(struct fx *f)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->base, sizeof(f->base), "%s/fsops-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->base)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(f->root, sizeof(f->root), "%s/root", f->base);
    snprintf(f->outside, sizeof(f->outside), "%s/outside", f->base);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/workspace", f->root);
    if (mkdir(f->root, 0755) < 0 || mkdir(path, 0755) < 0 || mkdir(f->outside, 0755) < 0)
        abort();
    snprintf(path, sizeof(path), "%s/secret", f->outside);
    FILE *fp = fopen(path, "w");
    if (!fp || fputs(SECRET, fp) < 0 || fclose(fp) != 0)
        abort();
    f->root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    f->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (f->root_fd < 0 || f->inotify_fd < 0 ||
        inotify_add_watch(f->inotify_fd, f->outside, IN_ALL_EVENTS) < 0)
        abort();
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    chmod(path, 0700); /* directories the tests made unwritable */
    return remove(path) < 0 ? -1 : 0;
}

static void fx_teardown(struct fx *f)
{
    close(f->root_fd);
    close(f->inotify_fd);
    nftw(f->base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Number of inotify events on outside/ and its entries since the last call. */
static int outside_events(struct fx *f)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int events = 0;
    for (;;) {
        ssize_t n = read(f->inotify_fd, buf, sizeof(buf));
        if (n <= 0)
            return events;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            events++;
            p += sizeof(*ev) + ev->len;
        }
    }
}

/* A path below the host root (rotating static buffers, enough for one expression). */
static const char *host(struct fx *f, const char *rel)
{
    static char bufs[4][PATH_MAX];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", f->root, rel);
    return b;
}

static void host_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0)
        abort();
}

/* The whole file as a NUL-terminated string (caller frees), or NULL if it cannot be read. */
static char *host_read(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)r;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static bool host_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static mode_t host_mode(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

/* Nothing happened to outside/: no event of any kind, same single file, same content. */
static void check_outside_untouched(struct fx *f)
{
    CHECK_INT_EQ(outside_events(f), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/secret", f->outside);
    char *s = host_read(path, NULL);
    CHECK_STR_EQ(s, SECRET);
    free(s);
    int entries = 0;
    DIR *d = opendir(f->outside);
    for (struct dirent *de; d && (de = readdir(d));)
        entries += de->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK_INT_EQ(entries, 1);
    outside_events(f); /* our own look */
}

static json_t *run(struct fx *f, struct fsop_request req)
{
    if (!req.cwd)
        req.cwd = "/workspace";
    if (req.path && !req.path_len)
        req.path_len = strlen(req.path);
    json_t *res = fsop_run(f->root_fd, &req);
    if (!res)
        abort();
    return res;
}

static json_t *fs_read(struct fx *f, const char *path, uint64_t offset, size_t max)
{
    return run(f, (struct fsop_request){
                      .kind = FSOP_READ, .path = path, .offset = offset, .max_bytes = max});
}

static json_t *fs_write(struct fx *f, const char *path, const void *data, size_t len, bool append,
                        int mode)
{
    return run(f, (struct fsop_request){.kind = FSOP_WRITE,
                                        .path = path,
                                        .data = data,
                                        .data_len = len,
                                        .append = append,
                                        .mode = mode});
}

static json_t *fs_write_str(struct fx *f, const char *path, const char *s)
{
    return fs_write(f, path, s, strlen(s), false, -1);
}

static json_t *fs_list(struct fx *f, const char *path, bool recursive, size_t max)
{
    return run(f, (struct fsop_request){
                      .kind = FSOP_LIST, .path = path, .recursive = recursive, .max_entries = max});
}

static json_t *fs_delete(struct fx *f, const char *path, bool recursive)
{
    struct fsop_request req = {.kind = FSOP_DELETE, .path = path, .recursive = recursive};
    memcpy(req.protected_paths, default_protected, sizeof(default_protected));
    return run(f, req);
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_int_t jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -999;
}

static int jbool(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

#define CHECK_OK(res)                                                                              \
    do {                                                                                           \
        const char *e_ = jstr(res, "error");                                                       \
        if (e_)                                                                                    \
            CHECK_FAIL_("%s: unexpected error \"%s\"", #res, e_);                                  \
    } while (0)

#define CHECK_ERRNO(res, code)                                                                     \
    do {                                                                                           \
        const json_t *r_ = (res);                                                                  \
        if (!jstr(r_, "error"))                                                                    \
            CHECK_FAIL_("%s: expected errno %s, got a result", #res, #code);                       \
        else                                                                                       \
            CHECK_INT_EQ(jint(r_, "errno"), code);                                                 \
    } while (0)

/* ---- read and write ---- */

TEST(write_then_read_text)
{
    struct fx f;
    fx_setup(&f);
    json_auto_t *w = fs_write_str(&f, "hello.py", "print('h\xC3\xA9llo')\n");
    CHECK_OK(w);
    CHECK_STR_EQ(jstr(w, "path"), "/workspace/hello.py");
    CHECK_INT_EQ(jint(w, "bytes_written"), 16);
    CHECK_INT_EQ(jint(w, "size"), 16);
    CHECK_INT_EQ(jbool(w, "created"), 1);
    char *s = host_read(host(&f, "workspace/hello.py"), NULL);
    CHECK_STR_EQ(s, "print('h\xC3\xA9llo')\n");
    free(s);

    json_auto_t *r = fs_read(&f, "/workspace/./hello.py", 0, 0);
    CHECK_OK(r);
    CHECK_STR_EQ(jstr(r, "type"), "file");
    CHECK_STR_EQ(jstr(r, "path"), "/workspace/hello.py");
    CHECK_STR_EQ(jstr(r, "text"), "print('h\xC3\xA9llo')\n");
    CHECK_STR_EQ(jstr(r, "mime_type"), "text/x-python");
    CHECK_INT_EQ(jbool(r, "binary"), 0);
    CHECK_INT_EQ(jbool(r, "truncated"), 0);
    CHECK_INT_EQ(jint(r, "size"), 16);
    CHECK_INT_EQ(jint(r, "bytes"), 16);
    CHECK_INT_EQ(jint(r, "offset"), 0);
    CHECK(!json_object_get(r, "base64"));

    json_auto_t *w2 = fs_write_str(&f, "hello.py", "x");
    CHECK_OK(w2);
    CHECK_INT_EQ(jbool(w2, "created"), 0);
    CHECK_INT_EQ(jint(w2, "size"), 1);
    fx_teardown(&f);
}

TEST(write_then_read_binary)
{
    struct fx f;
    fx_setup(&f);
    const unsigned char data[] = {'a', 0, 'b', 0xFF, 0xFE, 0x80, '\n', 0};
    json_auto_t *w = fs_write(&f, "blob.txt", data, sizeof(data), false, -1);
    CHECK_OK(w);
    size_t len;
    char *s = host_read(host(&f, "workspace/blob.txt"), &len);
    CHECK(s && len == sizeof(data) && memcmp(s, data, len) == 0);
    free(s);

    json_auto_t *r = fs_read(&f, "blob.txt", 0, 0);
    CHECK_OK(r);
    char want[32];
    base64_encode(data, sizeof(data), want);
    CHECK_STR_EQ(jstr(r, "base64"), want);
    CHECK_INT_EQ(jbool(r, "binary"), 1);
    CHECK_INT_EQ(jint(r, "bytes"), sizeof(data));
    /* decided by content, not by the .txt extension */
    CHECK_STR_EQ(jstr(r, "mime_type"), "application/octet-stream");
    CHECK(!json_object_get(r, "text"));

    /* a NUL byte alone makes otherwise valid UTF-8 binary */
    json_auto_t *w2 = fs_write(&f, "nul.txt", "ab\0cd", 5, false, -1);
    CHECK_OK(w2);
    json_auto_t *r2 = fs_read(&f, "nul.txt", 0, 0);
    CHECK_INT_EQ(jbool(r2, "binary"), 1);
    CHECK_STR_EQ(jstr(r2, "base64"), "YWIAY2Q=");
    fx_teardown(&f);
}

TEST(mime_types)
{
    struct fx f;
    fx_setup(&f);
    static const struct {
        const char *name, *content;
        size_t len;
        const char *type;
    } cases[] = {
        {"a.py", "x", 1, "text/x-python"},
        {"a.js", "x", 1, "text/javascript"},
        {"a.mjs", "x", 1, "text/javascript"},
        {"a.ts", "x", 1, "text/x-typescript"},
        {"a.json", "{}", 2, "application/json"},
        {"README.md", "x", 1, "text/markdown"},
        {"index.html", "x", 1, "text/html"},
        {"s.css", "x", 1, "text/css"},
        {"run.sh", "x", 1, "text/x-shellscript"},
        {"m.c", "x", 1, "text/x-c"},
        {"m.h", "x", 1, "text/x-c"},
        {"m.go", "x", 1, "text/x-go"},
        {"m.rs", "x", 1, "text/x-rust"},
        {"M.java", "x", 1, "text/x-java"},
        {"c.yaml", "x", 1, "application/yaml"},
        {"c.yml", "x", 1, "application/yaml"},
        {"c.toml", "x", 1, "application/toml"},
        {"d.xml", "x", 1, "application/xml"},
        {"d.csv", "x", 1, "text/csv"},
        {"UPPER.PY", "x", 1, "text/x-python"},
        {"Makefile", "all:\n", 5, "text/plain"},
        {".bashrc", "x", 1, "text/plain"},
        {"unknown.zzz", "x", 1, "text/plain"},
        {"text-named.png", "just text", 9, "text/plain"},
        {"p.bin", "\x89PNG\r\n\x1a\n\0\0", 10, "image/png"},
        {"j.bin", "\xFF\xD8\xFF\xE0\0", 5, "image/jpeg"},
        {"g.bin", "GIF89a\0\x80", 8, "image/gif"},
        {"w.bin", "RIFF\x10\0\0\0WEBPVP8 ", 16, "image/webp"},
        {"d.bin", "%PDF-1.7\n\xE2\xE3\xCF\xD3", 13, "application/pdf"},
        {"z.bin", "PK\x03\x04\x14\0", 6, "application/zip"},
        {"z.gz", "\x1f\x8b\x08\0", 4, "application/gzip"},
        {"prog",
         "\x7f"
         "ELF\x02\x01\x01\0",
         8, "application/x-executable"},
        {"riff.bin", "RIFF\x10\0\0\0WAVEfmt ", 16, "application/octet-stream"},
        {"noise.py", "\xC0\xAF", 2, "application/octet-stream"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_auto_t *w = fs_write(&f, cases[i].name, cases[i].content, cases[i].len, false, -1);
        CHECK_OK(w);
        json_auto_t *r = fs_read(&f, cases[i].name, 0, 0);
        CHECK_OK(r);
        CHECK_STR_EQ(jstr(r, "mime_type"), cases[i].type);
    }
    /* a binary read at an offset still sniffs the start of the file */
    json_auto_t *r = fs_read(&f, "p.bin", 4, 0);
    CHECK_INT_EQ(jbool(r, "binary"), 1);
    CHECK_STR_EQ(jstr(r, "mime_type"), "image/png");
    fx_teardown(&f);
}

TEST(svg_is_told_by_name_and_content)
{
    struct fx f;
    fx_setup(&f);
    static const char svg[] =
        "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
        "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
        "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n<!-- a plot -->\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"><rect width=\"4\" "
        "height=\"4\"/></svg>\n";
    host_write(host(&f, "workspace/plot.svg"), svg, strlen(svg));
    host_write(host(&f, "workspace/bare.SVG"), "  <svg/>", 8);
    host_write(host(&f, "workspace/notes.svg"), "not a drawing, <svg> named later", 32);
    host_write(host(&f, "workspace/drawing.txt"), "<svg/>", 6);
    static const struct {
        const char *name;
        uint64_t offset;
        size_t max;
        const char *type;
    } cases[] = {
        {"plot.svg", 0, 0, "image/svg+xml"},
        {"plot.svg", 0, 5, "image/svg+xml"},  /* sniffed past what was read */
        {"plot.svg", 60, 0, "image/svg+xml"}, /* and from the start at an offset */
        {"bare.SVG", 0, 0, "image/svg+xml"},
        {"notes.svg", 0, 0, "text/plain"}, /* the name alone is not enough */
        {"drawing.txt", 0, 0, "text/plain"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_auto_t *r = fs_read(&f, cases[i].name, cases[i].offset, cases[i].max);
        CHECK_OK(r);
        CHECK_INT_EQ(jbool(r, "binary"), 0);
        CHECK_STR_EQ(jstr(r, "mime_type"), cases[i].type);
        CHECK_INT_EQ(jbool(r, "image"), 0); /* SVG stays text */
    }
    fx_teardown(&f);
}

/* A 1x1 PNG as libpng writes it. */
static const unsigned char tiny_png[] = {
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00,
    0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78,
    0x9C, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
};

TEST(whole_images_are_told_from_cut_ones)
{
    struct fx f;
    fx_setup(&f);
    unsigned char png_tail[sizeof(tiny_png) + 1];
    memcpy(png_tail, tiny_png, sizeof(tiny_png));
    png_tail[sizeof(tiny_png)] = 0;
    const struct {
        const char *name, *content;
        size_t len;
        const char *type;
        int image;
    } cases[] = {
        {"a.png", (const char *)tiny_png, sizeof(tiny_png), "image/png", 1},
        {"cut.png", (const char *)tiny_png, sizeof(tiny_png) - 1, "image/png", 0},
        {"tail.png", (const char *)png_tail, sizeof(png_tail), "image/png", 0},
        {"no-ihdr.png",
         "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDX\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f"
         "\x15\xc4\x89\0\0\0\0IEND\xAE\x42\x60\x82",
         45, "image/png", 0},
        {"a.jpg", "\xFF\xD8\xFF\xE0\0\x10JFIF\0\xFF\xD9", 13, "image/jpeg", 1},
        {"cut.jpg", "\xFF\xD8\xFF\xE0\0\x10JFIF\0\xFF", 12, "image/jpeg", 0},
        {"a.gif", "GIF89a\x01\0\x01\0\x80\0\0\0\0\0;", 17, "image/gif", 1},
        {"old.gif", "GIF87a\x01\0\x01\0\x80\0\0\0\0\0;", 17, "image/gif", 1},
        {"cut.gif", "GIF89a\x01\0\x01\0\x80\0\0\0\0\0", 16, "image/gif", 0},
        {"a.webp", "RIFF\x0e\0\0\0WEBPVP8L\x02\0\0\0\x2f\0", 22, "image/webp", 1},
        {"cut.webp", "RIFF\x10\0\0\0WEBPVP8L\x02\0\0\0\x2f\0", 22, "image/webp", 0},
        {"wave.webp", "RIFF\x0e\0\0\0WEBPWAVE\x02\0\0\0\x2f\0", 22, "image/webp", 0},
        {"doc.pdf", "%PDF-1.7\n\xE2\xE3\xCF\xD3", 13, "application/pdf", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_auto_t *w = fs_write(&f, cases[i].name, cases[i].content, cases[i].len, false, -1);
        CHECK_OK(w);
        json_auto_t *r = fs_read(&f, cases[i].name, 0, 0);
        CHECK_OK(r);
        CHECK_INT_EQ(jbool(r, "binary"), 1);
        CHECK_STR_EQ(jstr(r, "mime_type"), cases[i].type);
        if (jbool(r, "image") != cases[i].image)
            CHECK_FAIL_("%s: image is %d", cases[i].name, jbool(r, "image"));
    }
    /* only all of it from the start is a whole image */
    json_auto_t *a = fs_read(&f, "a.png", 0, sizeof(tiny_png) - 1);
    CHECK_INT_EQ(jbool(a, "truncated"), 1);
    CHECK_INT_EQ(jbool(a, "image"), 0);
    json_auto_t *b = fs_read(&f, "a.png", 0, sizeof(tiny_png));
    CHECK_INT_EQ(jbool(b, "image"), 1);
    json_auto_t *c = fs_read(&f, "a.png", 1, 0);
    CHECK_STR_EQ(jstr(c, "mime_type"), "image/png");
    CHECK_INT_EQ(jbool(c, "image"), 0);
    /* text says image: false */
    json_auto_t *t = fs_write_str(&f, "t.txt", "text");
    json_auto_t *tr = fs_read(&f, "t.txt", 0, 0);
    CHECK_INT_EQ(jbool(tr, "image"), 0);
    fx_teardown(&f);
}

TEST(read_offset_and_max_bytes)
{
    struct fx f;
    fx_setup(&f);
    host_write(host(&f, "workspace/digits"), "0123456789", 10);
    json_auto_t *a = fs_read(&f, "digits", 3, 4);
    CHECK_STR_EQ(jstr(a, "text"), "3456");
    CHECK_INT_EQ(jint(a, "offset"), 3);
    CHECK_INT_EQ(jint(a, "bytes"), 4);
    CHECK_INT_EQ(jint(a, "size"), 10);
    CHECK_INT_EQ(jbool(a, "truncated"), 1);
    json_auto_t *b = fs_read(&f, "digits", 6, 4); /* exactly to the end */
    CHECK_STR_EQ(jstr(b, "text"), "6789");
    CHECK_INT_EQ(jbool(b, "truncated"), 0);
    json_auto_t *c = fs_read(&f, "digits", 8, 4);
    CHECK_STR_EQ(jstr(c, "text"), "89");
    CHECK_INT_EQ(jbool(c, "truncated"), 0);
    json_auto_t *d = fs_read(&f, "digits", 10, 4);
    CHECK_OK(d);
    CHECK_STR_EQ(jstr(d, "text"), "");
    CHECK_INT_EQ(jint(d, "bytes"), 0);
    CHECK_INT_EQ(jbool(d, "truncated"), 0);
    json_auto_t *e = fs_read(&f, "digits", 1000000, 4);
    CHECK_OK(e);
    CHECK_STR_EQ(jstr(e, "text"), "");
    json_auto_t *g = fs_read(&f, "digits", UINT64_MAX, 0);
    CHECK_OK(g);
    CHECK_STR_EQ(jstr(g, "text"), "");

    host_write(host(&f, "workspace/empty"), "", 0);
    json_auto_t *h = fs_read(&f, "empty", 0, 0);
    CHECK_OK(h);
    CHECK_STR_EQ(jstr(h, "text"), "");
    CHECK_INT_EQ(jbool(h, "binary"), 0);
    CHECK_INT_EQ(jint(h, "size"), 0);
    fx_teardown(&f);
}

TEST(read_cut_at_utf8_boundary)
{
    struct fx f;
    fx_setup(&f);
    /* a é € 😀 z: characters start at bytes 0, 1, 3, 6, 10 */
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";
    host_write(host(&f, "workspace/u.txt"), s, strlen(s));
    static const size_t want_bytes[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 11};
    for (size_t max = 2; max <= 11; max++) {
        json_auto_t *r = fs_read(&f, "u.txt", 0, max);
        CHECK_OK(r);
        CHECK_INT_EQ(jbool(r, "binary"), 0);
        CHECK_INT_EQ(jint(r, "bytes"), want_bytes[max]);
        CHECK_INT_EQ(jbool(r, "truncated"), max < 11);
        const char *t = jstr(r, "text");
        CHECK(t && strlen(t) == want_bytes[max] && memcmp(t, s, want_bytes[max]) == 0);
    }
    /* reading on from where the last read stopped reassembles the text */
    char got[64] = "";
    uint64_t off = 0;
    for (int i = 0; i < 20; i++) {
        json_auto_t *r = fs_read(&f, "u.txt", off, 4);
        CHECK_INT_EQ(jbool(r, "binary"), 0);
        strcat(got, jstr(r, "text") ? jstr(r, "text") : "?");
        off += (uint64_t)jint(r, "bytes");
        if (jbool(r, "truncated") != 1)
            break;
    }
    CHECK_STR_EQ(got, s);
    /* a limit smaller than the first character gives its bytes rather than nothing forever */
    json_auto_t *r = fs_read(&f, "u.txt", 6, 2);
    CHECK_INT_EQ(jbool(r, "binary"), 1);
    CHECK_INT_EQ(jint(r, "bytes"), 2);
    CHECK_STR_EQ(jstr(r, "base64"), "8J8=");
    /* an invalid tail that is not a cut character stays binary */
    host_write(host(&f, "workspace/bad.txt"), "abc\xC3(", 5);
    json_auto_t *b = fs_read(&f, "bad.txt", 0, 0);
    CHECK_INT_EQ(jbool(b, "binary"), 1);
    fx_teardown(&f);
}

TEST(append)
{
    struct fx f;
    fx_setup(&f);
    json_auto_t *a = fs_write(&f, "log.txt", "one\n", 4, true, -1);
    CHECK_OK(a);
    CHECK_INT_EQ(jbool(a, "created"), 1);
    json_auto_t *b = fs_write(&f, "log.txt", "two\n", 4, true, -1);
    CHECK_OK(b);
    CHECK_INT_EQ(jbool(b, "created"), 0);
    CHECK_INT_EQ(jint(b, "bytes_written"), 4);
    CHECK_INT_EQ(jint(b, "size"), 8);
    char *s = host_read(host(&f, "workspace/log.txt"), NULL);
    CHECK_STR_EQ(s, "one\ntwo\n");
    free(s);

    /* larger than one copy buffer */
    size_t big = 200000;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)('a' + i % 26);
    json_auto_t *c = fs_write(&f, "big", data, big, false, -1);
    CHECK_OK(c);
    json_auto_t *d = fs_write(&f, "big", "!", 1, true, -1);
    CHECK_INT_EQ(jint(d, "size"), big + 1);
    size_t len;
    s = host_read(host(&f, "workspace/big"), &len);
    CHECK(s && len == big + 1 && memcmp(s, data, big) == 0 && s[big] == '!');
    free(s);
    free(data);
    fx_teardown(&f);
}

TEST(write_keep_prunes_the_oldest_files_by_name)
{
    struct fx f;
    fx_setup(&f);
    CHECK(mkdir(host(&f, "workspace/out"), 0755) == 0);
    static const char *const old[] = {"20260101-a", "20260102-b", "20260103-c", ".hidden"};
    for (size_t i = 0; i < 4; i++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "workspace/out/%s", old[i]);
        host_write(host(&f, rel), "x", 1);
    }
    CHECK(mkdir(host(&f, "workspace/out/20250101-dir"), 0755) == 0);
    char secret[PATH_MAX];
    snprintf(secret, sizeof(secret), "%s/secret", f.outside);
    CHECK(symlink(secret, host(&f, "workspace/out/20250101-link")) == 0);
    struct fsop_request req = {.kind = FSOP_WRITE,
                               .path = "out/20260104-d",
                               .data = (const unsigned char *)"new",
                               .data_len = 3,
                               .mode = -1,
                               .keep = 2};
    json_auto_t *a = run(&f, req);
    CHECK_OK(a);
    /* the two newest regular files stay; links, directories and dot files are not counted */
    CHECK(!host_exists(host(&f, "workspace/out/20260101-a")));
    CHECK(!host_exists(host(&f, "workspace/out/20260102-b")));
    CHECK(host_exists(host(&f, "workspace/out/20260103-c")));
    CHECK(host_exists(host(&f, "workspace/out/20260104-d")));
    CHECK(host_exists(host(&f, "workspace/out/.hidden")));
    CHECK(host_exists(host(&f, "workspace/out/20250101-dir")));
    CHECK(host_exists(host(&f, "workspace/out/20250101-link")));
    /* the file just written stays even when its name sorts first */
    req.path = "out/0-first";
    req.keep = 1;
    json_auto_t *b = run(&f, req);
    CHECK_OK(b);
    CHECK(host_exists(host(&f, "workspace/out/0-first")));
    CHECK(!host_exists(host(&f, "workspace/out/20260103-c")));
    CHECK(host_exists(host(&f, "workspace/out/20260104-d")));
    /* without keep nothing goes */
    req.path = "out/1-second";
    req.keep = 0;
    json_auto_t *c = run(&f, req);
    CHECK_OK(c);
    CHECK(host_exists(host(&f, "workspace/out/0-first")));
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(write_modes)
{
    struct fx f;
    fx_setup(&f);
    mode_t old_umask = umask(077);
    json_auto_t *a = fs_write_str(&f, "default", "x");
    CHECK_OK(a);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/default")), 0644);
    json_auto_t *b = fs_write(&f, "private", "x", 1, false, 0600);
    CHECK_OK(b);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/private")), 0600);
    json_auto_t *c = fs_write(&f, "private", "y", 1, false, -1); /* keeps 0600 */
    CHECK_OK(c);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/private")), 0600);
    json_auto_t *d = fs_write(&f, "private", "z", 1, true, -1);
    CHECK_OK(d);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/private")), 0600);
    json_auto_t *e = fs_write(&f, "tool", "x", 1, false, 06755); /* no setuid/setgid */
    CHECK_OK(e);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/tool")), 0755);
    json_auto_t *g = fs_write(&f, "sticky", "x", 1, false, 01777);
    CHECK_OK(g);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/sticky")), 01777);
    chmod(host(&f, "workspace/tool"), 04755);
    json_auto_t *h = fs_write(&f, "tool", "y", 1, false, -1);
    CHECK_OK(h);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/tool")), 0755);
    umask(old_umask);
    fx_teardown(&f);
}

TEST(write_creates_parents)
{
    struct fx f;
    fx_setup(&f);
    mode_t old_umask = umask(077);
    json_auto_t *w = fs_write_str(&f, "/workspace/a//b/./c/../c/d.txt", "deep");
    umask(old_umask);
    CHECK_OK(w);
    CHECK_STR_EQ(jstr(w, "path"), "/workspace/a/b/c/d.txt");
    char *s = host_read(host(&f, "workspace/a/b/c/d.txt"), NULL);
    CHECK_STR_EQ(s, "deep");
    free(s);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/a")), 0755);
    CHECK_INT_EQ(host_mode(host(&f, "workspace/a/b/c")), 0755);
    json_auto_t *t = fs_write_str(&f, "/elsewhere/new/file", "x");
    CHECK_OK(t);
    CHECK(host_exists(host(&f, "elsewhere/new/file")));

    /* a parent that is a file */
    json_auto_t *n = fs_write_str(&f, "a/b/c/d.txt/e", "x");
    CHECK_ERRNO(n, ENOTDIR);
    CHECK_STR_CONTAINS(jstr(n, "error"), "cannot write '/workspace/a/b/c/d.txt/e'");
    fx_teardown(&f);
}

TEST(write_refuses_directories)
{
    struct fx f;
    fx_setup(&f);
    json_auto_t *a = fs_write_str(&f, "/workspace", "x");
    CHECK_ERRNO(a, EISDIR);
    CHECK_STR_EQ(jstr(a, "error"), "cannot write '/workspace': Is a directory");
    json_auto_t *b = fs_write_str(&f, "/", "x");
    CHECK_ERRNO(b, EISDIR);
    json_auto_t *c = fs_write_str(&f, "..", "x");
    CHECK_ERRNO(c, EISDIR);
    CHECK(mkfifo(host(&f, "workspace/fifo"), 0644) == 0);
    json_auto_t *d = fs_write_str(&f, "fifo", "x");
    CHECK_ERRNO(d, EINVAL);
    fx_teardown(&f);
}

/* No temporary file is left next to the target. */
static int count_temp_files(struct fx *f, const char *dir)
{
    DIR *d = opendir(host(f, dir));
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] == '.' && strstr(de->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    return n;
}

TEST(failed_write_leaves_target_intact)
{
    struct fx f;
    fx_setup(&f);
    host_write(host(&f, "workspace/keep.txt"), "original", 8);
    /* the file size limit makes the kernel fail the write midway (EFBIG), as a full disk would */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    char data[10000];
    memset(data, 'x', sizeof(data));
    json_auto_t *a = fs_write(&f, "keep.txt", data, sizeof(data), false, -1);
    json_auto_t *b = fs_write(&f, "keep.txt", data, sizeof(data), true, -1);
    json_auto_t *c = fs_write(&f, "new.txt", data, sizeof(data), false, -1);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    CHECK_ERRNO(a, EFBIG);
    CHECK_ERRNO(b, EFBIG);
    CHECK_ERRNO(c, EFBIG);
    char *s = host_read(host(&f, "workspace/keep.txt"), NULL);
    CHECK_STR_EQ(s, "original");
    free(s);
    CHECK(!host_exists(host(&f, "workspace/new.txt")));
    CHECK_INT_EQ(count_temp_files(&f, "workspace"), 0);

    json_auto_t *ok = fs_write_str(&f, "keep.txt", "changed");
    CHECK_OK(ok);
    CHECK_INT_EQ(count_temp_files(&f, "workspace"), 0);
    fx_teardown(&f);
}

TEST(read_errors)
{
    struct fx f;
    fx_setup(&f);
    json_auto_t *a = fs_read(&f, "missing.txt", 0, 0);
    CHECK_ERRNO(a, ENOENT);
    CHECK_STR_EQ(jstr(a, "error"),
                 "cannot read '/workspace/missing.txt': No such file or directory");
    json_auto_t *b = fs_read(&f, "missing/dir/x", 0, 0);
    CHECK_ERRNO(b, ENOENT);

    /* a FIFO with no writer: refused at once, never waited on */
    CHECK(mkfifo(host(&f, "workspace/fifo"), 0644) == 0);
    alarm(10);
    json_auto_t *c = fs_read(&f, "fifo", 0, 0);
    alarm(0);
    CHECK_ERRNO(c, EINVAL);
    CHECK_STR_EQ(jstr(c, "error"), "cannot read '/workspace/fifo': not a regular file");
    json_auto_t *d = fs_read(&f, "/dev/null", 0, 0); /* no /dev in this root */
    CHECK_ERRNO(d, ENOENT);
    fx_teardown(&f);
}

TEST(read_directory)
{
    struct fx f;
    fx_setup(&f);
    host_write(host(&f, "workspace/b.txt"), "b", 1);
    host_write(host(&f, "workspace/a.txt"), "aa", 2);
    CHECK(mkdir(host(&f, "workspace/sub"), 0755) == 0);
    host_write(host(&f, "workspace/sub/inner"), "i", 1);
    json_auto_t *r = fs_read(&f, ".", 0, 0);
    CHECK_OK(r);
    CHECK_STR_EQ(jstr(r, "type"), "directory");
    CHECK_STR_EQ(jstr(r, "path"), "/workspace");
    CHECK_INT_EQ(jint(r, "count"), 3); /* not recursive */
    json_t *entries = json_object_get(r, "entries");
    CHECK_STR_EQ(jstr(json_array_get(entries, 0), "name"), "a.txt");
    CHECK_STR_EQ(jstr(json_array_get(entries, 2), "type"), "directory");
    fx_teardown(&f);
}

/* ---- list ---- */

static void make_tree(struct fx *f)
{
    CHECK(mkdir(host(f, "workspace/src"), 0755) == 0);
    CHECK(mkdir(host(f, "workspace/src/lib"), 0700) == 0);
    host_write(host(f, "workspace/src/a.c"), "int a;\n", 7);
    host_write(host(f, "workspace/src/lib/b.c"), "int b;\n", 7);
    host_write(host(f, "workspace/src-x"), "x", 1);
    host_write(host(f, "workspace/README"), "readme", 6);
    CHECK(symlink("src", host(f, "workspace/link")) == 0);
}

static const char *entry_names(const json_t *res, char *out, size_t cap)
{
    out[0] = '\0';
    const json_t *entries = json_object_get(res, "entries");
    for (size_t i = 0; i < json_array_size(entries); i++) {
        if (i)
            strncat(out, " ", cap - strlen(out) - 1);
        const char *name = jstr(json_array_get(entries, i), "name");
        strncat(out, name ? name : "?", cap - strlen(out) - 1);
    }
    return out;
}

TEST(list_flat)
{
    struct fx f;
    fx_setup(&f);
    make_tree(&f);
    struct timespec times[2] = {{1700000000, 123000000}, {1700000000, 123456789}};
    CHECK(utimensat(AT_FDCWD, host(&f, "workspace/README"), times, 0) == 0);
    chmod(host(&f, "workspace/README"), 0640);
    json_auto_t *r = fs_list(&f, NULL, false, 0); /* the cwd */
    CHECK_OK(r);
    char names[512];
    CHECK_STR_EQ(jstr(r, "path"), "/workspace");
    CHECK_STR_EQ(entry_names(r, names, sizeof(names)), "README link src src-x");
    CHECK_INT_EQ(jint(r, "count"), 4);
    CHECK_INT_EQ(jbool(r, "truncated"), 0);
    json_t *entries = json_object_get(r, "entries");
    json_t *readme = json_array_get(entries, 0);
    CHECK_STR_EQ(jstr(readme, "type"), "file");
    CHECK_INT_EQ(jint(readme, "size"), 6);
    CHECK_STR_EQ(jstr(readme, "mode"), "0640");
    CHECK_STR_EQ(jstr(readme, "mtime"), "2023-11-14T22:13:20.123Z");
    CHECK_STR_EQ(jstr(json_array_get(entries, 1), "type"), "symlink");
    CHECK_STR_EQ(jstr(json_array_get(entries, 2), "type"), "directory");
    CHECK(mkfifo(host(&f, "workspace/src/fifo"), 0600) == 0);
    json_auto_t *s = fs_list(&f, "src", false, 0);
    CHECK_STR_EQ(entry_names(s, names, sizeof(names)), "a.c fifo lib");
    CHECK_STR_EQ(jstr(json_array_get(json_object_get(s, "entries"), 1), "type"), "other");
    CHECK_STR_EQ(jstr(json_array_get(json_object_get(s, "entries"), 2), "mode"), "0700");
    /* a symlink to a directory lists the directory */
    json_auto_t *l = fs_list(&f, "link", false, 0);
    CHECK_STR_EQ(entry_names(l, names, sizeof(names)), "a.c fifo lib");
    fx_teardown(&f);
}

TEST(list_recursive)
{
    struct fx f;
    fx_setup(&f);
    make_tree(&f);
    json_auto_t *r = fs_list(&f, "/workspace", true, 0);
    CHECK_OK(r);
    char names[512];
    /* each directory's contents right after it; the symlink is not followed */
    CHECK_STR_EQ(entry_names(r, names, sizeof(names)),
                 "README link src src/a.c src/lib src/lib/b.c src-x");
    CHECK_INT_EQ(jint(r, "count"), 7);
    CHECK_INT_EQ(jbool(r, "truncated"), 0);
    json_auto_t *t = fs_list(&f, "/workspace", true, 4);
    CHECK_STR_EQ(entry_names(t, names, sizeof(names)), "README link src src/a.c");
    CHECK_INT_EQ(jint(t, "count"), 4);
    CHECK_INT_EQ(jbool(t, "truncated"), 1);
    json_auto_t *flat = fs_list(&f, "/workspace", false, 2);
    CHECK_INT_EQ(jint(flat, "count"), 2);
    CHECK_INT_EQ(jbool(flat, "truncated"), 1);
    fx_teardown(&f);
}

TEST(list_single_entries_and_errors)
{
    struct fx f;
    fx_setup(&f);
    make_tree(&f);
    json_auto_t *a = fs_list(&f, "src/a.c", true, 0);
    CHECK_OK(a);
    char names[512];
    CHECK_STR_EQ(jstr(a, "path"), "/workspace/src/a.c");
    CHECK_STR_EQ(entry_names(a, names, sizeof(names)), "a.c");
    CHECK_INT_EQ(jint(a, "count"), 1);
    CHECK(symlink("nowhere", host(&f, "workspace/dangling")) == 0);
    json_auto_t *b = fs_list(&f, "dangling", false, 0);
    CHECK_OK(b);
    CHECK_STR_EQ(jstr(json_array_get(json_object_get(b, "entries"), 0), "type"), "symlink");
    json_auto_t *c = fs_list(&f, "missing", false, 0);
    CHECK_ERRNO(c, ENOENT);
    CHECK_STR_EQ(jstr(c, "error"), "cannot list '/workspace/missing': No such file or directory");
    json_auto_t *d = fs_list(&f, "/", false, 0);
    CHECK_STR_EQ(entry_names(d, names, sizeof(names)), "workspace");
    fx_teardown(&f);
}

TEST(list_names_that_are_not_utf8)
{
    struct fx f;
    fx_setup(&f);
    host_write(host(&f, "workspace/bad\xFFname"), "x", 1);
    json_auto_t *r = fs_list(&f, ".", false, 0);
    CHECK_OK(r);
    CHECK_STR_EQ(jstr(json_array_get(json_object_get(r, "entries"), 0), "name"),
                 "bad\xEF\xBF\xBDname");
    fx_teardown(&f);
}

/* ---- delete ---- */

TEST(delete_files_and_directories)
{
    struct fx f;
    fx_setup(&f);
    make_tree(&f);
    json_auto_t *a = fs_delete(&f, "README", false);
    CHECK_OK(a);
    CHECK_STR_EQ(jstr(a, "path"), "/workspace/README");
    CHECK_INT_EQ(jint(a, "deleted"), 1);
    CHECK(!host_exists(host(&f, "workspace/README")));

    CHECK(mkdir(host(&f, "workspace/empty"), 0755) == 0);
    json_auto_t *b = fs_delete(&f, "empty", false);
    CHECK_INT_EQ(jint(b, "deleted"), 1);
    CHECK(!host_exists(host(&f, "workspace/empty")));

    json_auto_t *c = fs_delete(&f, "src", false);
    CHECK_ERRNO(c, ENOTEMPTY);
    CHECK_STR_CONTAINS(jstr(c, "error"), "cannot delete '/workspace/src': directory not empty");
    CHECK(host_exists(host(&f, "workspace/src/a.c")));

    /* the symlink into src goes, src stays */
    json_auto_t *d = fs_delete(&f, "link", true);
    CHECK_INT_EQ(jint(d, "deleted"), 1);
    CHECK(!host_exists(host(&f, "workspace/link")));
    CHECK(host_exists(host(&f, "workspace/src/a.c")));

    json_auto_t *e = fs_delete(&f, "src", true);
    CHECK_OK(e);
    CHECK_INT_EQ(jint(e, "deleted"), 4); /* src, a.c, lib, lib/b.c */
    CHECK(!host_exists(host(&f, "workspace/src")));

    json_auto_t *g = fs_delete(&f, "src", true);
    CHECK_ERRNO(g, ENOENT);
    CHECK_STR_EQ(jstr(g, "error"), "cannot delete '/workspace/src': No such file or directory");
    json_auto_t *h = fs_delete(&f, "nope/deeper", false);
    CHECK_ERRNO(h, ENOENT);
    fx_teardown(&f);
}

TEST(delete_refuses_protected_paths)
{
    struct fx f;
    fx_setup(&f);
    host_write(host(&f, "workspace/file"), "x", 1);
    const char *refused[] = {"/",  "/workspace",         "/workspace/",   ".",
                             "..", "/workspace/sub/../", "//workspace//", "/.."};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        json_auto_t *r = fs_delete(&f, refused[i], true);
        CHECK_ERRNO(r, EPERM);
        CHECK_STR_CONTAINS(jstr(r, "error"), "refusing to delete '/");
    }
    json_auto_t *m = fs_delete(&f, "/workspace", true);
    CHECK_STR_EQ(jstr(m, "error"), "refusing to delete '/workspace'");
    CHECK(host_exists(host(&f, "workspace/file")));

    /* an ancestor of a protected path, and another name for one */
    CHECK(mkdir(host(&f, "data"), 0755) == 0);
    CHECK(mkdir(host(&f, "data/keep"), 0755) == 0);
    CHECK(symlink("/", host(&f, "workspace/rootlink")) == 0);
    CHECK(symlink("/data/keep", host(&f, "keeplink")) == 0);
    struct fsop_request req = {.kind = FSOP_DELETE,
                               .cwd = "/workspace",
                               .recursive = true,
                               .protected_paths = {"/workspace", "/data/keep", "/keeplink"}};
    static const char *const also_refused[] = {"/data", "/data/keep",
                                               "/workspace/rootlink/workspace",
                                               "/workspace/rootlink/data/keep", "/keeplink"};
    /* data/keep is empty, so even a plain rmdir would succeed */
    for (size_t i = 0; i < 2 * sizeof(also_refused) / sizeof(also_refused[0]); i++) {
        req.path = also_refused[i / 2];
        req.path_len = strlen(req.path);
        req.recursive = i % 2;
        json_auto_t *r = fsop_run(f.root_fd, &req);
        CHECK_ERRNO(r, EPERM);
    }
    CHECK(host_exists(host(&f, "data/keep")));
    CHECK(host_exists(host(&f, "workspace/file")));
    CHECK(host_exists(host(&f, "keeplink")));
    /* the link to / itself is just a link */
    req.path = "/workspace/rootlink";
    req.path_len = strlen(req.path);
    json_auto_t *ok = fsop_run(f.root_fd, &req);
    CHECK_OK(ok);
    CHECK_INT_EQ(jint(ok, "deleted"), 1);
    fx_teardown(&f);
}

TEST(delete_limits)
{
    struct fx f;
    fx_setup(&f);
    CHECK(mkdir(host(&f, "workspace/many"), 0755) == 0);
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof(name), "workspace/many/f%d", i);
        host_write(host(&f, name), "x", 1);
    }
    struct fsop_request req = {.kind = FSOP_DELETE,
                               .path = "many",
                               .path_len = 4,
                               .cwd = "/workspace",
                               .recursive = true,
                               .max_entries = 5};
    json_auto_t *a = fsop_run(f.root_fd, &req);
    CHECK_ERRNO(a, E2BIG);
    CHECK_STR_EQ(jstr(a, "error"),
                 "refusing to delete '/workspace/many': it holds more than 5 entries");
    CHECK(host_exists(host(&f, "workspace/many/f0")) && host_exists(host(&f, "workspace/many/f4")));
    req.max_entries = 6;
    json_auto_t *b = fsop_run(f.root_fd, &req);
    CHECK_OK(b);
    CHECK_INT_EQ(jint(b, "deleted"), 6);
    fx_teardown(&f);
}

/* ---- escapes ---- */

TEST(inotify_sees_outside_access)
{
    /* the detector the escape tests rely on does notice a read */
    struct fx f;
    fx_setup(&f);
    CHECK_INT_EQ(outside_events(&f), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/secret", f.outside);
    free(host_read(path, NULL));
    CHECK(outside_events(&f) > 0);
    fx_teardown(&f);
}

static void check_no_secret(const json_t *res)
{
    char *dump = json_dumps(res, 0);
    CHECK(dump && !strstr(dump, "top secret") && !strstr(dump, "dG9wIHNlY3JldC"));
    free(dump);
}

TEST(escape_by_dotdot)
{
    struct fx f;
    fx_setup(&f);
    const char *paths[] = {"../../outside/secret", "/../outside/secret", "../../../outside/secret",
                           "/workspace/../../outside/secret"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        json_auto_t *r = fs_read(&f, paths[i], 0, 0);
        CHECK_ERRNO(r, ENOENT);
        CHECK_STR_CONTAINS(jstr(r, "error"), "'/outside/secret'");
        json_auto_t *l = fs_list(&f, paths[i], false, 0);
        CHECK_ERRNO(l, ENOENT);
        json_auto_t *d = fs_delete(&f, paths[i], false);
        CHECK_ERRNO(d, ENOENT);
        check_no_secret(r);
    }
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        json_auto_t *w = fs_write_str(&f, paths[i], "pwned");
        CHECK_OK(w); /* lands inside the root */
        CHECK_STR_EQ(jstr(w, "path"), "/outside/secret");
    }
    char *s = host_read(host(&f, "outside/secret"), NULL);
    CHECK_STR_EQ(s, "pwned");
    free(s);
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(escape_by_symlinks)
{
    struct fx f;
    fx_setup(&f);
    char target[PATH_MAX];
    const char *base_name = strrchr(f.base, '/') + 1;
    /* each of these reaches outside/ when followed naively from root/workspace */
    CHECK(symlink(f.outside, host(&f, "workspace/abs")) == 0);
    CHECK(symlink("../..", host(&f, "workspace/up2")) == 0);
    CHECK(symlink("../../..", host(&f, "workspace/up3")) == 0);
    CHECK(symlink("../../outside", host(&f, "workspace/rel")) == 0);
    snprintf(target, sizeof(target), "%s/secret", f.outside);
    CHECK(symlink(target, host(&f, "workspace/abs_secret")) == 0);
    CHECK(symlink("../../outside/secret", host(&f, "workspace/rel_secret")) == 0);

    char up3[PATH_MAX];
    snprintf(up3, sizeof(up3), "up3/%s/outside/secret", base_name);
    const char *paths[] = {"abs/secret", "up2/outside/secret", up3,
                           "rel/secret", "abs_secret",         "rel_secret"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        json_auto_t *r = fs_read(&f, paths[i], 0, 0);
        CHECK_ERRNO(r, ENOENT);
        check_no_secret(r);
        json_auto_t *l = fs_list(&f, paths[i], false, 0);
        check_no_secret(l);
        json_auto_t *d = fs_delete(&f, paths[i], true);
        if (strstr(paths[i], "_secret"))
            CHECK_INT_EQ(jint(d, "deleted"), 1); /* the link itself */
        else
            CHECK_ERRNO(d, ENOENT);
    }
    /* listing the directory links shows nothing of outside/ */
    for (size_t i = 0; i < 3; i++) {
        static const char *const dirs[] = {"abs", "up2", "rel"};
        json_auto_t *l = fs_list(&f, dirs[i], true, 0);
        check_no_secret(l);
        char names[512];
        entry_names(l, names, sizeof(names));
        CHECK(!strstr(names, "secret"));
    }
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(escape_by_writing_through_symlinks)
{
    struct fx f;
    fx_setup(&f);
    char target[PATH_MAX];
    snprintf(target, sizeof(target), "%s/secret", f.outside);
    CHECK(symlink(target, host(&f, "workspace/abs_secret")) == 0);
    CHECK(symlink("../../outside/secret", host(&f, "workspace/rel_secret")) == 0);
    CHECK(symlink(f.outside, host(&f, "workspace/abs")) == 0);
    CHECK(symlink("../../outside", host(&f, "workspace/rel")) == 0);
    static const char *const finals[] = {"abs_secret", "rel_secret", "abs", "rel"};
    for (size_t i = 0; i < 4; i++) {
        json_auto_t *w = fs_write_str(&f, finals[i], "pwned");
        CHECK_ERRNO(w, ELOOP);
        CHECK_STR_CONTAINS(jstr(w, "error"), "is a symlink");
        json_auto_t *a = fs_write(&f, finals[i], "pwned", 5, true, 0777);
        CHECK_ERRNO(a, ELOOP);
    }
    /* through a symlinked directory: resolved inside the root, where there is no such path */
    static const char *const through[] = {"abs/secret", "rel/secret", "abs/new", "rel/new"};
    for (size_t i = 0; i < 4; i++) {
        json_auto_t *w = fs_write_str(&f, through[i], "pwned");
        CHECK(jstr(w, "error") != NULL);
    }
    CHECK_INT_EQ(count_temp_files(&f, "workspace"), 0);
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(escape_by_deleting_through_symlinks)
{
    struct fx f;
    fx_setup(&f);
    CHECK(symlink(f.outside, host(&f, "workspace/abs")) == 0);
    CHECK(symlink("../../outside", host(&f, "workspace/rel")) == 0);
    CHECK(mkdir(host(&f, "workspace/tree"), 0755) == 0);
    CHECK(symlink(f.outside, host(&f, "workspace/tree/abs")) == 0);
    CHECK(symlink("../../../outside", host(&f, "workspace/tree/rel")) == 0);
    json_auto_t *a = fs_delete(&f, "abs/secret", false);
    CHECK_ERRNO(a, ENOENT);
    json_auto_t *b = fs_delete(&f, "rel/secret", true);
    CHECK_ERRNO(b, ENOENT);
    json_auto_t *c = fs_delete(&f, "abs", true);
    CHECK_INT_EQ(jint(c, "deleted"), 1);
    json_auto_t *d = fs_delete(&f, "tree", true);
    CHECK_INT_EQ(jint(d, "deleted"), 3);
    CHECK(!host_exists(host(&f, "workspace/tree")));
    CHECK(host_exists(host(&f, "workspace/rel")));
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(escape_by_bad_paths)
{
    struct fx f;
    fx_setup(&f);
    /* the length says there is more after the NUL */
    static const char nul_path[] = "x\0/../../../outside/secret";
    static const enum fsop_kind kinds[] = {FSOP_READ, FSOP_WRITE, FSOP_LIST, FSOP_DELETE};
    char *long_path = malloc(5001);
    memset(long_path, 'a', 5000);
    for (int i = 1; i < 5000; i += 2)
        long_path[i] = '/';
    long_path[5000] = '\0';
    for (size_t i = 0; i < 4; i++) {
        json_auto_t *n = run(&f, (struct fsop_request){.kind = kinds[i],
                                                       .path = nul_path,
                                                       .path_len = sizeof(nul_path) - 1,
                                                       .data = (const unsigned char *)"x",
                                                       .data_len = 1,
                                                       .mode = -1});
        CHECK_ERRNO(n, EINVAL);
        CHECK_STR_EQ(jstr(n, "error"), "path contains a NUL byte");
        json_auto_t *l = run(&f, (struct fsop_request){.kind = kinds[i],
                                                       .path = long_path,
                                                       .data = (const unsigned char *)"x",
                                                       .data_len = 1,
                                                       .mode = -1});
        CHECK_ERRNO(l, ENAMETOOLONG);
        CHECK_STR_EQ(jstr(l, "error"), "path is longer than 4096 bytes");
        json_auto_t *e = run(&f, (struct fsop_request){.kind = kinds[i], .path = "", .mode = -1});
        if (kinds[i] != FSOP_LIST) /* LIST with no path lists the cwd */
            CHECK_ERRNO(e, EINVAL);
    }
    free(long_path);
    CHECK(!host_exists(host(&f, "workspace/x")) && !host_exists(host(&f, "workspace/a")));
    check_outside_untouched(&f);
    fx_teardown(&f);
}

/* Runs fn in a child with a private mount namespace (when allowed), so that bind mounts can be
 * made inside the root; the child's CHECK failures become its exit status. */
static bool write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A private mount namespace, inside a user namespace of our own when not privileged. */
static bool enter_mount_namespace(void)
{
    if (unshare(CLONE_NEWNS) == 0)
        return true;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
        return false;
    char map[64];
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
    if (!write_proc("/proc/self/setgroups", "deny") || !write_proc("/proc/self/uid_map", map))
        return false;
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
    return write_proc("/proc/self/gid_map", map);
}

static bool in_mount_namespace(struct fx *f, void (*fn)(struct fx *f))
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!enter_mount_namespace() || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(77);
        fn(f);
        _exit(test_failed_flag ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        fprintf(stderr, "  (no mount namespace here: %s)\n", "bind mount checks skipped");
        return false;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return true;
}

static void magic_links_with_proc(struct fx *f)
{
    CHECK(mount("/proc", host(f, "proc"), NULL, MS_BIND | MS_REC, NULL) == 0);
    /* the fd opened before the mount sees the old mount tree */
    close(f->root_fd);
    f->root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int out_fd = open(f->outside, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char via_root[PATH_MAX], via_fd[PATH_MAX], via_thread[PATH_MAX];
    snprintf(via_root, sizeof(via_root), "/proc/self/root%s/secret", f->outside);
    snprintf(via_fd, sizeof(via_fd), "/proc/self/fd/%d/secret", out_fd);
    snprintf(via_thread, sizeof(via_thread), "/proc/thread-self/root%s/secret", f->outside);
    const char *paths[] = {via_root, via_fd, via_thread};
    for (size_t i = 0; i < 3; i++) {
        /* the control: an ordinary lookup from the root does reach the secret */
        int fd = openat(f->root_fd, paths[i] + 1, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        if (fd >= 0)
            close(fd);
        outside_events(f);
        json_auto_t *r = fs_read(f, paths[i], 0, 0);
        CHECK_ERRNO(r, ELOOP);
        check_no_secret(r);
        json_auto_t *w = fs_write_str(f, paths[i], "pwned");
        CHECK(jstr(w, "error") != NULL);
        json_auto_t *d = fs_delete(f, paths[i], true);
        CHECK(jstr(d, "error") != NULL);
        json_auto_t *l = fs_list(f, paths[i], true, 0);
        check_no_secret(l);
        check_outside_untouched(f);
    }
    json_auto_t *env = fs_read(f, "/proc/self/environ", 0, 0);
    CHECK_ERRNO(env, EACCES);
    close(out_fd);
}

TEST(escape_by_magic_links)
{
    struct fx f;
    fx_setup(&f);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "/proc/self/root%s/secret", f.outside);
    json_auto_t *r = fs_read(&f, path, 0, 0); /* no /proc in this root */
    CHECK_ERRNO(r, ENOENT);
    CHECK(mkdir(host(&f, "proc"), 0755) == 0);
    if (!in_mount_namespace(&f, magic_links_with_proc)) {
        /* still show that a magic link is refused: with the host's / as the root */
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct fsop_request req = {.kind = FSOP_READ, .path = path, .path_len = strlen(path)};
        json_auto_t *h = fsop_run(root, &req);
        CHECK_ERRNO(h, ELOOP);
        close(root);
    }
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(read_refuses_procfs)
{
    /* with the host's / as the root, as a worker in a sandbox with /proc mounted sees it */
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    static const char *const paths[] = {"/proc/self/environ", "/proc/self/mem",
                                        "/proc/thread-self/environ", "/proc/version"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct fsop_request req = {
            .kind = FSOP_READ, .path = paths[i], .path_len = strlen(paths[i])};
        json_auto_t *r = fsop_run(root, &req);
        CHECK_ERRNO(r, EACCES);
        CHECK_STR_CONTAINS(jstr(r, "error"), "files in /proc are not readable here");
    }
    /* listing is only names */
    struct fsop_request req = {.kind = FSOP_LIST, .path = "/proc/self", .path_len = 10};
    json_auto_t *l = fsop_run(root, &req);
    CHECK_OK(l);
    close(root);
}

static void mount_point_inside(struct fx *f)
{
    CHECK(mount(f->outside, host(f, "workspace/victim/mnt"), NULL, MS_BIND, NULL) == 0);
    close(f->root_fd);
    f->root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    outside_events(f);
    json_auto_t *d = fs_delete(f, "victim", true);
    CHECK_ERRNO(d, EBUSY);
    CHECK(host_exists(host(f, "workspace/victim/file")));
    json_auto_t *m = fs_delete(f, "victim/mnt", true);
    CHECK_ERRNO(m, EBUSY);
    umount(host(f, "workspace/victim/mnt"));
    check_outside_untouched(f);
}

TEST(delete_stops_at_mount_points)
{
    struct fx f;
    fx_setup(&f);
    CHECK(mkdir(host(&f, "workspace/victim"), 0755) == 0);
    CHECK(mkdir(host(&f, "workspace/victim/mnt"), 0755) == 0);
    host_write(host(&f, "workspace/victim/file"), "x", 1);
    in_mount_namespace(&f, mount_point_inside);
    check_outside_untouched(&f);
    fx_teardown(&f);
}

/* A thread keeps swapping workspace/d between a real directory and a symlink that would lead
 * to outside/ if it were followed from the host, while operations go through it. */
struct swapper {
    char d[PATH_MAX], e[PATH_MAX];
    atomic_bool stop;
};

static void *swap_loop(void *p)
{
    struct swapper *s = p;
    while (!atomic_load(&s->stop))
        renameat2(AT_FDCWD, s->d, AT_FDCWD, s->e, RENAME_EXCHANGE);
    return NULL;
}

TEST(escape_by_racing_renames)
{
    struct fx f;
    fx_setup(&f);
    CHECK(mkdir(host(&f, "workspace/d"), 0755) == 0);
    host_write(host(&f, "workspace/d/secret"), "inside", 6);
    CHECK(symlink("../../outside", host(&f, "workspace/e")) == 0);
    static struct swapper s; /* its own copies: host() is not for two threads */
    snprintf(s.d, sizeof(s.d), "%s", host(&f, "workspace/d"));
    snprintf(s.e, sizeof(s.e), "%s", host(&f, "workspace/e"));
    atomic_store(&s.stop, false);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, swap_loop, &s) == 0);
    int reads = 0;
    for (int i = 0; i < 2000; i++) {
        json_auto_t *r = fs_read(&f, "d/secret", 0, 0);
        if (!jstr(r, "error")) {
            CHECK_STR_EQ(jstr(r, "text"), "inside");
            reads++;
        }
        check_no_secret(r);
        json_decref(fs_write_str(&f, "d/new", "x"));
        json_auto_t *l = fs_list(&f, "d", true, 0);
        check_no_secret(l);
        json_decref(fs_delete(&f, "d/new", false));
    }
    atomic_store(&s.stop, true);
    pthread_join(t, NULL);
    fprintf(stderr, "  (%d of 2000 reads went through the real directory)\n", reads);
    check_outside_untouched(&f);
    fx_teardown(&f);
}

TEST(path_normalization)
{
    static const struct {
        const char *cwd, *in, *out;
    } cases[] = {
        {"/workspace", "a.txt", "/workspace/a.txt"},
        {"/workspace", "./a//b/", "/workspace/a/b"},
        {"/workspace", "/etc/passwd", "/etc/passwd"},
        {"/workspace", "..", "/"},
        {"/workspace", "../../../..", "/"},
        {"/workspace", "/../../x", "/x"},
        {"/workspace", "a/../../b", "/b"},
        {"/workspace", "...", "/workspace/..."},
        {"/workspace", ".hidden/..x", "/workspace/.hidden/..x"},
        {"/", ".", "/"},
        {"//a//b//", "c", "/a/b/c"},
        {"relative", "x", "/relative/x"},
        {NULL, "x", "/x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        struct err err = {0};
        CHECK_INT_EQ(
            fsop_path_normalize(cases[i].cwd, cases[i].in, strlen(cases[i].in), &out, &err), 0);
        CHECK_STR_EQ(out, cases[i].out);
        free(out);
    }
    /* counted, not NUL-terminated */
    char *out = NULL;
    CHECK_INT_EQ(fsop_path_normalize("/", "abcdef", 3, &out, NULL), 0);
    CHECK_STR_EQ(out, "/abc");
    free(out);
    /* exactly the limit is fine; the cwd counts towards the normalized length */
    char *p = malloc(4097);
    memset(p, 'a', 4096);
    p[0] = '/';
    p[4096] = '\0';
    out = NULL;
    CHECK_INT_EQ(fsop_path_normalize("/", p, 4096, &out, NULL), 0);
    free(out);
    struct err err = {0};
    out = NULL;
    CHECK_INT_EQ(fsop_path_normalize("/", p, 4097, &out, &err), -ENAMETOOLONG);
    CHECK(out == NULL);
    CHECK_INT_EQ(fsop_path_normalize("/workspace", p + 1, 4095, &out, &err), -ENAMETOOLONG);
    CHECK(out == NULL);
    free(p);
}

TEST_MAIN()
