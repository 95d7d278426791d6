/* Building the "debian" template: `sandbox-mcp template build debian`, which the server also runs
 * as a child of its own (template_keeper.c).
 *
 * A trusted step run by root: debootstrap a Debian minbase tree (trixie, or bookworm where the
 * mirror has no trixie) from the configured mirror, install what coding agents expect with apt
 * inside it (python3, pip, venv, git, the GitHub CLI gh, a C toolchain, node, npm, numpy, pandas,
 * matplotlib, scipy) and pnpm with npm, check that every tool runs, and only then move the tree
 * into place as TEMPLATE_DIR/debian/rootfs. A build that fails removes what it made.
 *
 * Every program runs in a private mount namespace of its own (template_run.c), so removing a
 * half-built tree can never reach into the host's /dev.
 *
 * The tree keeps the ids debootstrap gave it (root is 0): each sandbox mounts it idmapped into
 * its own id range, so the template's root is every sandbox's root.
 *
 * The recipe (a version, packages, apt sources, pnpm version and the host's local certificate
 * authorities) is hashed into
 * DATA_DIR/templates/debian/recipe; a template with the same hash that still passes the checks is
 * kept.
 *
 * Running sandboxes keep the tree they started on as their overlay lower layer, and removing its
 * files would pull them from under those sandboxes. A replaced tree is therefore renamed to
 * debian.old.<time> and removed only when no sandbox that started before then is left; later
 * builds remove the ones kept. */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/ids.h"
#include "base/util.h"

#define DEBIAN_RECIPE "debian-template-8"
#define DEBIAN_SUITE "trixie"
/* Where the mirror has no DEBIAN_SUITE (an old or partial mirror). */
#define DEBIAN_SUITE_FALLBACK "bookworm"
#define DEBIAN_VARIANT "minbase"
#define DEBIAN_MIRROR "http://deb.debian.org/debian"
/* npm from its registry rather than Debian's package, which brings some 350 node-* packages
 * (half the build) and an older npm: a line that runs on trixie's node 20 and bookworm's node 18,
 * checked against the registry's sha512 before it is unpacked. */
#define NPM_VERSION "10.9.9"
#define NPM_SHA512                                                                                 \
    "d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2524abf673e20c35931cd8305d1db" \
    "b8887134d6eefdc0e7b8435bd458bf65b862"
/* A pnpm line that runs on trixie's node 20 and bookworm's node 18. */
#define PNPM_VERSION "10.34.9"
/* Slack when telling from start times whether a sandbox may use a replaced tree: its overlay is
 * mounted a moment before its init starts. */
#define OLD_TREE_MARGIN_S 10
/* Certificate authorities the host's administrator added (update-ca-certificates(8)). */
#define LOCAL_CAS "/usr/local/share/ca-certificates"
#define LOCAL_CA_MAX (256 * 1024)

static const char *const packages[] = {"python3",
                                       "python-is-python3",
                                       "python3-pip",
                                       "python3-venv",
                                       "git",
                                       "gh",
                                       "build-essential",
                                       "ca-certificates",
                                       "curl",
                                       "procps",
                                       "unzip",
                                       "xz-utils",
                                       "nodejs",
                                       "python3-numpy",
                                       "python3-pandas",
                                       "python3-scipy",
                                       "python3-matplotlib"};

/* Each must exit 0 in the finished tree; run through env(1), which searches PATH. */
static const char *const checks[][4] = {
    {"python3", "-c", "import sys; print(sys.version)", NULL},
    {"python3", "-c",
     "import numpy, pandas, scipy, matplotlib; import matplotlib.pyplot; "
     "print('numpy', numpy.__version__, 'pandas', pandas.__version__, 'scipy', scipy.__version__, "
     "'matplotlib', matplotlib.__version__)",
     NULL},
    {"pip3", "--version", NULL},
    {"git", "--version", NULL},
    {"gh", "--version", NULL},
    {"gcc", "--version", NULL},
    {"node", "--version", NULL},
    {"npm", "--version", NULL},
    {"pnpm", "--version", NULL},
};

static const char hosts[] = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n";
/* apt keeps its lists compressed (lz4 with trixie's apt, gzip with bookworm's) and without
 * translated descriptions, which lets the tree keep them; dpkg writes plain lines, not a
 * terminal's progress, into what a model reads. */
static const char apt_conf[] = "Acquire::GzipIndexes \"true\";\n"
                               "Acquire::CompressionTypes::Order:: \"gz\";\n"
                               "Acquire::Languages \"none\";\n"
                               "Dpkg::Use-Pty \"0\";\n";
/* pnpm's own configuration (npm does not read it): `pnpm add -g` links commands where npm's
 * global ones go, on PATH, without `pnpm setup`. */
static const char pnpm_rc[] = "global-bin-dir=/usr/local/bin\n";
/* What no sandbox reads, left out by dpkg from every package the build installs (copyright
 * files stay); and no fsync after each file, which halves the build (a tree that is not finished
 * is thrown away anyway) and speeds up installs in sandboxes, whose layers are disposable. */
static const char dpkg_excludes[] = "force-unsafe-io\n"
                                    "path-exclude /usr/share/doc/*\n"
                                    "path-include /usr/share/doc/*/copyright\n"
                                    "path-exclude /usr/share/man/*\n"
                                    "path-exclude /usr/share/info/*\n"
                                    "path-exclude /usr/share/locale/*\n"
                                    "path-include /usr/share/locale/locale.alias\n";
/* The sandbox is the user's own machine: pip installs into the system (its layer) as root, as
 * the model asks, without Debian's externally-managed refusal or the warning about root. */
static const char pip_conf[] =
    "[global]\nbreak-system-packages = true\nroot-user-action = ignore\n";

/* Where progress goes for the server (template_keeper.c), or -1: one line per step. */
static int status_fd = -1;

static void status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void status(const char *fmt, ...)
{
    if (status_fd < 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    ssize_t w = write(status_fd, line, (size_t)n);
    (void)w;
}

static size_t size_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* --- walking trees (tree.c) --- */

static int size_entry(int dirfd, const char *name, const struct stat *st, void *ctx)
{
    *(uint64_t *)ctx += (uint64_t)st->st_blocks * 512;
    return 0;
}

/* Remove path and everything under it (never what is mounted below it). */
static int remove_tree(const char *path)
{
    return tree_remove(AT_FDCWD, path);
}

/* --- the recipe --- */

/* The first http(s) URI in list (a deb822 "URIs:" value or the rest of a one-line "deb" entry)
 * of a Debian archive (security) or mirror (!security), without trailing slashes. Archives are
 * told by their last path component ("debian-security", "debian"), which also passes over
 * other distributions' mirrors on a derivative host. */
static bool pick_uri(char *list, bool security, char *out, size_t size)
{
    const char *want = security ? "/debian-security" : "/debian";
    for (char *save = NULL, *u = strtok_r(list, " \t\n", &save); u;
         u = strtok_r(NULL, " \t\n", &save)) {
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
            continue;
        size_t n = strlen(u), w = strlen(want);
        while (n > 8 && u[n - 1] == '/')
            n--;
        if (n >= size || n < w || memcmp(u + n - w, want, w) != 0)
            continue;
        snprintf(out, size, "%.*s", (int)n, u);
        return true;
    }
    return false;
}

/* The host's Debian mirror (or security archive) from /etc/apt/sources.list.d/debian.sources or
 * /etc/apt/sources.list; false when neither names one. */
static bool host_apt_uri(bool security, char *out, size_t size)
{
    char line[4096];
    _cleanup_fclose_ FILE *f = fopen("/etc/apt/sources.list.d/debian.sources", "re");
    while (f && fgets(line, sizeof(line), f))
        if (strncasecmp(line, "URIs:", 5) == 0 && pick_uri(line + 5, security, out, size))
            return true;
    _cleanup_fclose_ FILE *g = fopen("/etc/apt/sources.list", "re");
    while (g && fgets(line, sizeof(line), g)) {
        char *p = line + strspn(line, " \t");
        if (strncmp(p, "deb", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
            continue;
        p += 4;
        p += strspn(p, " \t");
        if (*p == '[') {
            char *end = strchr(p, ']');
            if (!end)
                continue;
            p = end + 1;
        }
        if (pick_uri(p, security, out, size))
            return true;
    }
    return false;
}

/* Call fn for each *.crt file directly in LOCAL_CAS (name, content), in name order. */
static int local_cas_each(int (*fn)(const char *name, const char *data, size_t len, void *ctx),
                          void *ctx)
{
    struct dirent **names = NULL;
    int n = scandir(LOCAL_CAS, &names, NULL, alphasort);
    int r = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", LOCAL_CAS, name);
        if (r == 0 && len > 4 && strcmp(name + len - 4, ".crt") == 0 && stat(path, &st) == 0 &&
            S_ISREG(st.st_mode) && st.st_size <= LOCAL_CA_MAX) {
            _cleanup_free_ char *data = xmalloc((size_t)st.st_size + 1);
            _cleanup_fclose_ FILE *f = fopen(path, "re");
            size_t got = f ? fread(data, 1, (size_t)st.st_size, f) : 0;
            r = fn(name, data, got, ctx);
        }
        free(names[i]);
    }
    free(names);
    return r;
}

static int digest_ca(const char *name, const char *data, size_t len, void *ctx)
{
    char hash[65];
    sha256_hex(data, len, hash);
    buf_printf(ctx, "%s %s\n", name, hash);
    return 0;
}

/* A digest of the host's local certificate authorities, which the tree trusts as well. */
static void local_cas_digest(char out[65])
{
    struct buf b;
    buf_init(&b, 1 << 20);
    local_cas_each(digest_ca, &b);
    sha256_hex(b.data ? b.data : "", b.len, out);
    buf_release(&b);
}

/* Neither the suite nor the mirror is part of the hash: the suite is chosen when a build starts
 * (trixie unless the mirror lacks it), and any mirror serves the same packages; a tree of the same
 * recipe is kept whichever it got them from. */
struct recipe {
    char mirror[1024];
    char security[1024]; /* "" when there is no security archive to add */
    char suite[32];      /* set by choose_suite() */
    char *text;          /* everything that makes the tree, one "key value" a line */
    char hash[65];
};

static void recipe_init(struct recipe *rc, const char *mirror)
{
    char host[1024];
    memset(rc, 0, sizeof(*rc));
    bool have_host = host_apt_uri(false, host, sizeof(host));
    snprintf(rc->mirror, sizeof(rc->mirror), "%s",
             mirror      ? mirror
             : have_host ? host
                         : DEBIAN_MIRROR);
    size_t n = strlen(rc->mirror);
    while (n > 8 && rc->mirror[n - 1] == '/')
        rc->mirror[--n] = '\0';
    /* The host's security archive goes with the host's own mirror (or Debian's); a mirror the
     * operator names alone is used alone (it may be all the build can reach). */
    if (!mirror || (have_host && strcmp(rc->mirror, host) == 0) ||
        strcmp(rc->mirror, DEBIAN_MIRROR) == 0)
        host_apt_uri(true, rc->security, sizeof(rc->security));
    char list[512] = "";
    n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(packages); i++)
        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? " " : "", packages[i]);
    char cas[65];
    local_cas_digest(cas);
    rc->text = xasprintf("recipe %s\nvariant %s\npackages %s\nnpm %s\npnpm %s\nlocal_cas %s\n",
                         DEBIAN_RECIPE, DEBIAN_VARIANT, list, NPM_VERSION, PNPM_VERSION, cas);
    sha256_hex(rc->text, strlen(rc->text), rc->hash);
}

/* The tree's /etc/apt/sources.list for rc->suite. */
static char *recipe_sources(const struct recipe *rc)
{
    if (!rc->security[0])
        return xasprintf("deb %s %s main\ndeb %s %s-updates main\n", rc->mirror, rc->suite,
                         rc->mirror, rc->suite);
    return xasprintf("deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n",
                     rc->mirror, rc->suite, rc->mirror, rc->suite, rc->security, rc->suite);
}

static void recipe_release(struct recipe *rc)
{
    free(rc->text);
}

/* Whether the mirror has a suite: 1 yes, 0 no (it answered without it), or -EIO with err when it
 * could not be asked. */
static int mirror_has_suite(const char *mirror, const char *suite, struct err *err)
{
    _cleanup_free_ char *url = xasprintf("%s/dists/%s/Release", mirror, suite);
    if (strncmp(url, "file://", 7) == 0)
        return access(url + 7, R_OK) == 0;
    CURL *c = curl_easy_init();
    if (!c)
        return err_set(err, -ENOMEM, "cannot start a transfer");
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK)
        return err_set(err, -EIO, "cannot reach the Debian mirror '%s': %s", mirror,
                       errbuf[0] ? errbuf : curl_easy_strerror(rc));
    if (code == 200)
        return 1;
    if (code == 404 || code == 410)
        return 0;
    return err_set(err, -EIO, "the Debian mirror '%s' answered %ld for '%s'", mirror, code, url);
}

/* Pick DEBIAN_SUITE, or DEBIAN_SUITE_FALLBACK where the mirror lacks it (said in the output). */
static int choose_suite(struct recipe *rc, struct err *err)
{
    int r = mirror_has_suite(rc->mirror, DEBIAN_SUITE, err);
    if (r < 0)
        return r;
    if (r == 1) {
        snprintf(rc->suite, sizeof(rc->suite), "%s", DEBIAN_SUITE);
        return 0;
    }
    if ((r = mirror_has_suite(rc->mirror, DEBIAN_SUITE_FALLBACK, err)) < 0)
        return r;
    if (r == 0)
        return err_set(err, -ENOENT, "the Debian mirror '%s' has neither %s nor %s", rc->mirror,
                       DEBIAN_SUITE, DEBIAN_SUITE_FALLBACK);
    fprintf(stderr, "template debian: the mirror '%s' has no %s: building %s instead\n", rc->mirror,
            DEBIAN_SUITE, DEBIAN_SUITE_FALLBACK);
    snprintf(rc->suite, sizeof(rc->suite), "%s", DEBIAN_SUITE_FALLBACK);
    return 0;
}

/* Whether dir/recipe starts with the line hash. */
static bool recipe_matches(const char *dir, const char *hash)
{
    char path[PATH_MAX], line[128];
    snprintf(path, sizeof(path), "%s/recipe", dir);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f || !fgets(line, sizeof(line), f))
        return false;
    line[strcspn(line, "\n")] = '\0';
    return strcmp(line, hash) == 0;
}

/* --- building --- */

static int find_debootstrap(char *out, size_t size)
{
    const char *path = getenv("PATH");
    _cleanup_free_ char *dirs =
        xasprintf("%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "/usr/local/sbin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue;
        snprintf(out, size, "%s/debootstrap", d);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -ENOENT;
}

/* Run every check in the tree, printing what each reports unless quiet. */
static int check_tree(const char *rootfs, bool quiet, struct err *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
        const char *argv[6] = {"/usr/bin/env"};
        char shown[256] = "";
        size_t n = 0;
        for (size_t j = 0; checks[i][j]; j++) {
            argv[j + 1] = checks[i][j];
            n += (size_t)snprintf(shown + n, sizeof(shown) - n, "%s%s", j ? " " : "", checks[i][j]);
        }
        struct template_run r = {.argv = argv, .root = rootfs, .check = true};
        if (template_run(&r, err) < 0) {
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            size_t len = size_min(strcspn(r.out, "\n"), 200);
            return err_set(err, err->code, "check '%s' failed: %s%s%.*s", shown, why,
                           len ? ": " : "", (int)len, r.out);
        }
        if (!quiet)
            fprintf(stderr, "template debian: ok %s: %.*s\n", shown,
                    (int)size_min(strcspn(r.out, "\n"), 100), r.out);
    }
    return 0;
}

static int write_text(const char *path, const char *text)
{
    unlink(path);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n)
        return -errno;
    return 0;
}

/* Create the directories above path (mode 0755) that are missing. */
static int make_parents(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return 0;
}

static int copy_text(const char *src, const char *dst)
{
    char buf[8192];
    _cleanup_fclose_ FILE *f = fopen(src, "re");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = '\0';
    return write_text(dst, buf);
}

/* Empty each of dirs (below rootfs) but for apt's lock files and partial/ directories. */
static int clean_dirs(const char *rootfs, const char *const *dirs, size_t ndirs, struct err *err)
{
    char path[PATH_MAX];
    for (size_t i = 0; i < ndirs; i++) {
        snprintf(path, sizeof(path), "%s/%s", rootfs, dirs[i]);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        DIR *d = fdopendir(fd);
        if (!d)
            return err_set(err, -errno, "cannot open '%s': %s", path, strerror(errno));
        fd = -1;
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
            struct stat st;
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            /* apt's lock files and partial/ directories stay, so that apt finds its layout */
            if (S_ISDIR(st.st_mode) && strcmp(de->d_name, "partial") == 0)
                continue;
            if (strcmp(de->d_name, "lock") == 0)
                continue;
            r = tree_remove(dirfd(d), de->d_name);
        }
        closedir(d);
        if (r < 0)
            return err_set(err, r, "cannot clean '%s': %s", path, strerror(-r));
    }
    return 0;
}

/* Copy a local certificate authority of the host into the tree's LOCAL_CAS (ctx), where
 * ca-certificates' postinst adds it to the bundle: the host's trust (a TLS-inspecting proxy, a
 * private registry) holds for npm during the build and inside sandboxes, as with the host
 * template, which copies the host's /etc/ssl. */
static int copy_ca(const char *name, const char *data, size_t len, void *ctx)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", (const char *)ctx, name);
    unlink(path);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    return write(fd, data, len) == (ssize_t)len ? 0 : -EIO;
}

/* Run argv chrooted into rootfs (with /proc and /dev), its output on stderr behind prefix. */
static int run_in(const char *rootfs, const char *prefix, const char *const *argv, struct err *err)
{
    struct template_run r = {.argv = argv, .root = rootfs, .prefix = prefix};
    return template_run(&r, err);
}

static int build_tree(const char *tmp, struct recipe *rc, struct err *err)
{
    char rootfs[PATH_MAX], path[PATH_MAX], debootstrap[PATH_MAX];
    int r;
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
    if (find_debootstrap(debootstrap, sizeof(debootstrap)) < 0)
        return err_set(err, -ENOENT,
                       "'debootstrap' is not installed: run 'apt-get install debootstrap'");
    if ((r = choose_suite(rc, err)) < 0)
        return r;
    if (mkdir(tmp, 0700) < 0)
        return err_set(err, -errno, "cannot create '%s': %s", tmp, strerror(errno));

    /* debootstrap lays the base only: its own resolver misses packages that are reached through
     * virtual ones (npm's dependencies are), so apt installs the rest inside. */
    fprintf(stderr, "template debian: debootstrap %s (%s) from %s\n", rc->suite, DEBIAN_VARIANT,
            rc->mirror);
    status("building debootstrap %s from %s", rc->suite, rc->mirror);
    const char *bootstrap_argv[] = {debootstrap,
                                    "--variant=" DEBIAN_VARIANT,
                                    "--components=main",
                                    rc->suite,
                                    rootfs,
                                    rc->mirror,
                                    NULL};
    struct template_run bootstrap = {.argv = bootstrap_argv, .prefix = "  debootstrap: "};
    if ((r = template_run(&bootstrap, err)) < 0)
        return r;

    /* apt and npm resolve names with the host's resolver and trust its authorities; the sandbox
     * has no network and gets an empty resolv.conf at the end. */
    snprintf(path, sizeof(path), "%s/etc/resolv.conf", rootfs);
    if ((r = copy_text("/etc/resolv.conf", path)) < 0)
        return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    snprintf(path, sizeof(path), "%s%s", rootfs, LOCAL_CAS);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));
    if ((r = local_cas_each(copy_ca, path)) < 0)
        return err_set(err, r, "cannot copy '%s' into '%s': %s", LOCAL_CAS, path, strerror(-r));
    _cleanup_free_ char *sources = recipe_sources(rc);
    static const struct {
        const char *name, *text;
    } conf[] = {{"etc/apt/apt.conf.d/90sandbox", apt_conf},
                {"etc/dpkg/dpkg.cfg.d/90sandbox", dpkg_excludes},
                {"etc/pip.conf", pip_conf},
                {"root/.config/pnpm/rc", pnpm_rc}};
    snprintf(path, sizeof(path), "%s/etc/apt/sources.list", rootfs);
    if ((r = write_text(path, sources)) < 0)
        return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    for (size_t i = 0; i < ARRAY_SIZE(conf); i++) {
        snprintf(path, sizeof(path), "%s/%s", rootfs, conf[i].name);
        if ((r = make_parents(path)) < 0 || (r = write_text(path, conf[i].text)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    }
    /* debootstrap's own lists, stored uncompressed: apt fetches them again, kept as above */
    static const char *const lists[] = {"var/lib/apt/lists"};
    if ((r = clean_dirs(rootfs, lists, ARRAY_SIZE(lists), err)) < 0)
        return r;
    status("building apt-get install");
    fprintf(stderr, "template debian: apt-get install");
    for (size_t i = 0; i < ARRAY_SIZE(packages); i++)
        fprintf(stderr, " %s", packages[i]);
    fprintf(stderr, "\n");
    const char *update_argv[] = {"/usr/bin/apt-get", "-q", "update", NULL};
    if ((r = run_in(rootfs, "  apt: ", update_argv, err)) < 0)
        return r;
    const char *install_argv[ARRAY_SIZE(packages) + 6] = {"/usr/bin/apt-get", "-q", "-y",
                                                          "--no-install-recommends", "install"};
    for (size_t i = 0; i < ARRAY_SIZE(packages); i++)
        install_argv[5 + i] = packages[i];
    if ((r = run_in(rootfs, "  apt: ", install_argv, err)) < 0)
        return r;

    status("building npm and pnpm");
    fprintf(stderr, "template debian: npm %s from the registry\n", NPM_VERSION);
    /* Unpacked where npm -g puts packages, with its prefix there as its built-in setting, so
     * that `npm install -g` installs under /usr/local as Debian's npm does. */
    const char *fetch_npm_argv[] = {
        "/bin/sh", "-ec",
        "registry=${npm_config_registry:-https://registry.npmjs.org}\n"
        "curl -fsSL --retry 3 \"${registry%/}/npm/-/npm-" NPM_VERSION ".tgz\" -o /tmp/npm.tgz\n"
        "echo \"" NPM_SHA512 "  /tmp/npm.tgz\" | sha512sum -c -\n"
        "mkdir -p /usr/local/lib/node_modules/npm /usr/local/bin\n"
        "tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 "
        "--no-same-owner\n"
        "echo prefix=/usr/local > /usr/local/lib/node_modules/npm/npmrc\n"
        "ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm\n"
        "ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx\n"
        "rm /tmp/npm.tgz\n",
        NULL};
    if ((r = run_in(rootfs, "  npm: ", fetch_npm_argv, err)) < 0)
        return r;
    fprintf(stderr, "template debian: npm install --global pnpm@%s\n", PNPM_VERSION);
    const char *npm_argv[] = {"/usr/local/bin/npm", "install",   "--global",
                              "--no-audit",         "--no-fund", "--no-update-notifier",
                              "pnpm@" PNPM_VERSION, NULL};
    if ((r = run_in(rootfs, "  npm: ", npm_argv, err)) < 0)
        return r;

    fprintf(stderr, "template debian: finishing the tree\n");
    /* matplotlib's font cache, made once here rather than at every sandbox's first plot */
    const char *fonts_argv[] = {"/usr/bin/python3", "-c", "import matplotlib.pyplot", NULL};
    if ((r = run_in(rootfs, "  python3: ", fonts_argv, err)) < 0)
        return r;
    const char *clean_argv[] = {"/usr/bin/apt-get", "clean", NULL};
    if ((r = run_in(rootfs, "  apt: ", clean_argv, err)) < 0)
        return r;
    /* What the build leaves behind that no sandbox needs: downloaded packages and npm's cache.
     * apt's lists stay (compressed, see apt_conf), so that `apt-get install` works at once. */
    static const char *const leftovers[] = {"var/cache/apt/archives",
                                            "var/cache/apt/srcpkgcache.bin", "root/.npm", "tmp"};
    if ((r = clean_dirs(rootfs, leftovers, ARRAY_SIZE(leftovers), err)) < 0)
        return r;
    static const struct {
        const char *name, *text;
    } etc[] = {{"hosts", hosts}, {"hostname", "sandbox\n"}, {"resolv.conf", ""}};
    for (size_t i = 0; i < ARRAY_SIZE(etc); i++) {
        snprintf(path, sizeof(path), "%s/etc/%s", rootfs, etc[i].name);
        if ((r = write_text(path, etc[i].text)) < 0)
            return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    }
    snprintf(path, sizeof(path), "%s/workspace", rootfs);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));

    fprintf(stderr, "template debian: checking the tools\n");
    status("building checking the tools");
    if ((r = check_tree(rootfs, false, err)) < 0)
        return r;
    snprintf(path, sizeof(path), "%s/recipe", tmp);
    _cleanup_free_ char *text =
        xasprintf("%s\n%ssuite %s\nmirror %s\nsecurity %s\n", rc->hash, rc->text, rc->suite,
                  rc->mirror, rc->security[0] ? rc->security : "none");
    if ((r = write_text(path, text)) < 0)
        return err_set(err, r, "cannot write '%s': %s", path, strerror(-r));
    return 0;
}

/* --- replacing and removing trees --- */

static int64_t boot_time_s(void)
{
    char line[256];
    long long btime = 0;
    _cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %lld", &btime) == 1)
            break;
    return btime;
}

/* Whether the mount table of /proc/<pid> holds a sandbox's root: an overlay whose lower layer is
 * a sandbox's idmapped template (".../sandboxes/<id>/lower"). Which template it is cannot be told
 * from there (the idmapped mount is detached once the sandbox pivots), so every sandbox of any
 * data dir counts: keeping a tree too long costs only disk. */
static bool mounts_sandbox_overlay(const char *pid)
{
    static const char suffix[] = "/lower";
    char path[64], line[8192];
    snprintf(path, sizeof(path), "/proc/%s/mountinfo", pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f)) {
        char *p = strstr(line, " - overlay ");
        p = p ? strstr(p, "lowerdir=") : NULL;
        if (!p)
            continue;
        p += strlen("lowerdir=");
        size_t n = strcspn(p, ", \n");
        size_t s = sizeof(suffix) - 1;
        if (n >= s && memcmp(p + n - s, suffix, s) == 0 && memmem(p, n, "/sandboxes/", 11))
            return true;
    }
    return false;
}

/* When the oldest process in a mount namespace with a sandbox's overlay started (epoch
 * seconds), or INT64_MAX when there is no such process. */
int64_t template_oldest_sandbox(void)
{
    int64_t oldest = INT64_MAX, btime = boot_time_s();
    long ticks = sysconf(_SC_CLK_TCK);
    struct ns {
        ino_t ino;
        bool debian;
    } *seen = NULL;
    size_t nseen = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
        if (stat(path, &st) < 0)
            continue;
        size_t i = 0;
        while (i < nseen && seen[i].ino != st.st_ino)
            i++;
        if (i == nseen) {
            seen = xrealloc(seen, (nseen + 1) * sizeof(*seen));
            seen[nseen].ino = st.st_ino;
            seen[nseen++].debian = mounts_sandbox_overlay(de->d_name);
        }
        if (!seen[i].debian)
            continue;
        uint64_t start = proc_start_time((pid_t)atoi(de->d_name));
        if (start && ticks > 0 && btime + (int64_t)(start / (uint64_t)ticks) < oldest)
            oldest = btime + (int64_t)(start / (uint64_t)ticks);
    }
    if (d)
        closedir(d);
    free(seen);
    return oldest;
}

/* Remove trees left by builds that died (the lock says none runs) and replaced trees that no
 * running sandbox may still use. */
static void remove_leftovers(const char *base)
{
    int64_t oldest = -1;
    DIR *d = opendir(base);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *name = de->d_name;
        bool building = strncmp(name, "debian.building.", 16) == 0;
        if (!building && strncmp(name, "debian.old.", 11) != 0)
            continue;
        if (!building) {
            if (oldest < 0)
                oldest = template_oldest_sandbox();
            if (oldest < strtoll(name + 11, NULL, 10) + OLD_TREE_MARGIN_S)
                continue;
        }
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", base, name);
        fprintf(stderr, "template debian: removing '%s'\n", path);
        int r = remove_tree(path);
        if (r < 0)
            fprintf(stderr, "template debian: cannot remove '%s': %s\n", path, strerror(-r));
    }
    if (d)
        closedir(d);
}

/* Move tmp to dir; an existing dir becomes DIR.old.<time>, removed unless a running sandbox
 * may use it. */
static int replace_tree(const char *base, const char *tmp, const char *dir, struct err *err)
{
    struct stat st;
    if (lstat(dir, &st) < 0) {
        if (rename(tmp, dir) < 0)
            return err_set(err, -errno, "cannot rename '%s': %s", tmp, strerror(errno));
        return 0;
    }
    /* One exchange, so that a sandbox starting meanwhile finds one tree or the other. */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) < 0)
        return err_set(err, -errno, "cannot exchange '%s' and '%s': %s", tmp, dir, strerror(errno));
    char old[PATH_MAX];
    long long now = (long long)(time_now_ms() / 1000);
    snprintf(old, sizeof(old), "%s.old.%lld", dir, now);
    if (rename(tmp, old) < 0)
        return err_set(err, -errno, "cannot rename '%s': %s", tmp, strerror(errno));
    if (template_oldest_sandbox() < now + OLD_TREE_MARGIN_S) {
        fprintf(stderr,
                "template debian: kept the replaced tree '%s': running sandboxes use it; a later "
                "build removes it once they stopped\n",
                old);
        return 0;
    }
    remove_leftovers(base);
    return 0;
}

/* --- entry point --- */

/* Keep the template in dir when its recipe is rc's and it passes the checks (unless force), else
 * build it in tmp and move it into place. */
static int update_or_build(const char *base, const char *dir, const char *tmp, struct recipe *rc,
                           bool force, struct err *err)
{
    char rootfs[PATH_MAX];
    struct stat st;
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", dir);
    if (stat(rootfs, &st) == 0) {
        struct err cerr = {0};
        if (force) {
            fprintf(stderr, "template debian: rebuilding (--force)\n");
        } else if (!recipe_matches(dir, rc->hash)) {
            fprintf(stderr, "template debian: the recipe changed: rebuilding\n");
            status("outdated the recipe changed");
        } else if (status("verifying"), check_tree(rootfs, true, &cerr) < 0) {
            fprintf(stderr, "template debian: %s: rebuilding\n", cerr.msg);
            status("invalid %s", cerr.msg);
        } else {
            fprintf(stderr, "template debian: up to date in '%s' (recipe %.16s)\n", dir, rc->hash);
            status("ready");
            return 0;
        }
    }
    int64_t t0 = time_mono_ms();
    int r = build_tree(tmp, rc, err);
    if (r < 0) {
        /* Nothing half-built is left: a tree that cannot be removed now (it is still mounted
         * somewhere, say) is removed by the next build. */
        if (lstat(tmp, &st) == 0 && remove_tree(tmp) < 0)
            fprintf(stderr,
                    "template debian: the unfinished tree stays in '%s' until the next "
                    "build removes it\n",
                    tmp);
        return err_wrap(err, "template 'debian'");
    }
    uint64_t bytes = 0;
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
    tree_walk(AT_FDCWD, rootfs, size_entry, &bytes);
    if ((r = replace_tree(base, tmp, dir, err)) < 0)
        return err_wrap(err, "template 'debian'");
    long long secs = (long long)((time_mono_ms() - t0 + 500) / 1000);
    fprintf(stderr, "template debian: built %s in %lld s, %.0f MiB, in '%s' (recipe %.16s)\n",
            rc->suite, secs, (double)bytes / (1 << 20), dir, rc->hash);
    status("ready built %s in %lld s, %.0f MiB", rc->suite, secs, (double)bytes / (1 << 20));
    return 0;
}

int template_build(const char *name, const struct template_build_opts *o, struct err *err)
{
    if (strcmp(name, "host") == 0) {
        fprintf(stderr, "template host: nothing to build: it is assembled from the host when "
                        "the first sandbox starts\n");
        return 0;
    }
    if (strcmp(name, "debian") != 0)
        return err_set(err, -EINVAL, "unknown template '%s' (host or debian)", name);
    if (geteuid() != 0)
        return err_set(err, -EPERM, "building template 'debian' needs root");
    char base[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX], lock[PATH_MAX];
    status_fd = o->status_fd;
    /* the programs the build runs do not inherit it: the server reads it to its end */
    if (status_fd >= 0 && fcntl(status_fd, F_SETFD, FD_CLOEXEC) < 0)
        status_fd = -1;
    snprintf(base, sizeof(base), "%s", o->dir);
    snprintf(dir, sizeof(dir), "%s/debian", base);
    snprintf(tmp, sizeof(tmp), "%s.building.%d", dir, (int)getpid());
    snprintf(lock, sizeof(lock), "%s.lock", dir);
    if (mkdir(base, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create '%s': %s", base, strerror(errno));
    _cleanup_close_ int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0)
        return err_set(err, -errno, "cannot open '%s': %s", lock, strerror(errno));
    if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            return err_set(err, -errno, "cannot lock '%s': %s", lock, strerror(errno));
        /* Another server sharing the directory, or the command line: its result is ours. */
        fprintf(stderr, "template debian: another process is building it: waiting\n");
        status("waiting another process is building it");
        while (flock(lock_fd, LOCK_EX) < 0)
            if (errno != EINTR)
                return err_set(err, -errno, "cannot lock '%s': %s", lock, strerror(errno));
    }
    remove_leftovers(base);

    struct recipe rc;
    recipe_init(&rc, o->mirror);
    int r = update_or_build(base, dir, tmp, &rc, o->force, err);
    recipe_release(&rc);
    if (r < 0)
        status("failed %s", err->msg);
    return r;
}
