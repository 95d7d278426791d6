/* The sandboxes' network policy: which names and ports a sandbox may ask its proxy for (host
 * patterns, by mode), and which resolved addresses the proxy may then connect to (public ones,
 * never the host's own, unless the operator names them). Built once from the configuration;
 * the checks read it only, with no resolution, clock or globals, so any thread may call them. */
#include "egress/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/config.h"
#include "base/util.h"

#define NAME_MAX_LEN 253
#define OWN_ADDRS_MAX 256

/* Package registries and git hosts, so the ordinary tools work out of the box
 * (SANDBOX_NETWORK_DEFAULTS=0 drops them). docs/SANDBOX.md lists them; keep the two alike. */
static const char *const builtin_patterns[] = {
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "*.gitlab.com",
    "bitbucket.org",
    "*.bitbucket.org",
    "codeload.github.com",
    "objects.githubusercontent.com",
};
#define BUILTIN_N (sizeof(builtin_patterns) / sizeof(builtin_patterns[0]))

struct pattern {
    char
        name[NAME_MAX_LEN + 1]; /* lowercase, no trailing dot; for a wildcard the part after "*." */
    bool wildcard;              /* matches names ending in ".name", not name itself */
    uint16_t port;              /* 0: 80 and 443 */
};

struct egress_policy {
    enum egress_mode mode;
    bool defaults; /* the built-in list is in patterns */
    int n_patterns;
    struct pattern patterns[BUILTIN_N + EGRESS_PATTERNS_MAX];
    struct egress_rules addrs; /* SANDBOX_NETWORK_ADDRS */
    bool ask_kernel;           /* own addresses: egress_addr_is_local, not own[] */
    int n_own;
    struct egress_addr own[OWN_ADDRS_MAX];
};

int egress_mode_parse(const char *text, enum egress_mode *out)
{
    static const enum egress_mode modes[] = {EGRESS_MODE_NONE, EGRESS_MODE_ALLOWLIST,
                                             EGRESS_MODE_PUBLIC};
    for (size_t i = 0; text && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(text, egress_mode_name(modes[i])) == 0) {
            *out = modes[i];
            return 0;
        }
    return -EINVAL;
}

const char *egress_mode_name(enum egress_mode m)
{
    switch (m) {
    case EGRESS_MODE_NONE: return "none";
    case EGRESS_MODE_ALLOWLIST: return "allowlist";
    case EGRESS_MODE_PUBLIC: return "public";
    }
    return "none";
}

enum egress_mode egress_mode_narrow(enum egress_mode a, enum egress_mode b)
{
    return a < b ? a : b;
}

const char *egress_reason_name(enum egress_reason r)
{
    switch (r) {
    case EGRESS_OK: return "ok";
    case EGRESS_DENY_MODE_NONE: return "mode_none";
    case EGRESS_DENY_NOT_LISTED: return "not_listed";
    case EGRESS_DENY_PORT: return "port";
    case EGRESS_DENY_ADDRESS: return "address";
    case EGRESS_DENY_SELF: return "self";
    case EGRESS_DENY_UNRESOLVED: return "unresolved";
    case EGRESS_DENY_SNI: return "sni";
    }
    return "unknown";
}

/* A last label of digits only rules out what the C library would read as an IPv4 address along
 * with the rest of such names. */
bool egress_name_valid(const char *s)
{
    size_t n = strlen(s), label = 0;
    if (n == 0 || n > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (s[i] == '.' || s[i] == '\0') {
            if (label == 0 || label > 63)
                return false;
            label = 0;
        } else if (isalnum((unsigned char)s[i]) || s[i] == '_' || (s[i] == '-' && label > 0)) {
            label++;
        } else {
            return false;
        }
    }
    const char *last = strrchr(s, '.');
    last = last ? last + 1 : s;
    if (strspn(last, "0123456789") == strlen(last))
        return false;
    struct in_addr v4;
    return inet_aton(s, &v4) == 0;
}

/* Copy host into out (NAME_MAX_LEN + 2 bytes) lowercased, without IPv6 brackets or one trailing
 * dot. Returns -1, out "", when it cannot be a name or an address (too long). */
static int normalize(const char *host, char *out)
{
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && memchr(host, ':', n)) {
        host++;
        n -= 2;
    }
    if (n > 0 && host[n - 1] == '.')
        n--;
    out[0] = '\0';
    if (n > NAME_MAX_LEN)
        return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)host[i]);
    out[n] = '\0';
    return 0;
}

/* host for a message: at most a name's length, anything unprintable shown as '?'. */
static void shown(const char *host, char out[NAME_MAX_LEN + 1])
{
    size_t i = 0;
    for (; host[i] && i < NAME_MAX_LEN; i++)
        out[i] = isprint((unsigned char)host[i]) ? host[i] : '?';
    out[i] = '\0';
}

/* "name:port", "[v6]:port" */
static void host_port(const char *host, uint16_t port, char out[NAME_MAX_LEN + 16])
{
    char h[NAME_MAX_LEN + 1];
    shown(host, h);
    bool v6 = strchr(h, ':') && h[0] != '[';
    snprintf(out, NAME_MAX_LEN + 16, "%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "", port);
}

static int parse_port(const char *s, uint16_t *out)
{
    if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
        return -1;
    unsigned long v = strtoul(s, NULL, 10);
    if (v == 0 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

#define ALLOW_KEY "SANDBOX_NETWORK_ALLOW"

static int address_entry(const char *entry, struct err *err)
{
    return err_set(err, -EINVAL,
                   ALLOW_KEY " entry '%s' is an address: patterns are for names, addresses go in "
                             "SANDBOX_NETWORK_ADDRS",
                   entry);
}

/* One pattern (trimmed, non-empty; changed in place) into *pat. */
static int parse_pattern(char *e, struct pattern *pat, struct err *err)
{
    char entry[NAME_MAX_LEN + 16];
    snprintf(entry, sizeof(entry), "%s", e);
    memset(pat, 0, sizeof(*pat));
    struct egress_addr addr;
    char *colon = strrchr(e, ':');
    if (e[0] == '[' || egress_addr_parse(e, &addr) == 0)
        return address_entry(entry, err);
    if (colon) {
        *colon = '\0';
        if (strchr(e, ':'))
            return egress_addr_parse(e, &addr) == 0
                       ? address_entry(entry, err)
                       : err_set(err, -EINVAL, ALLOW_KEY " entry '%s' is not a host name", entry);
        if (colon[1 + strspn(colon + 1, "0123456789abcdefghijklmnopqrstuvwxyz-")])
            return err_set(err, -EINVAL, ALLOW_KEY " entry '%s' is not a host name", entry);
        if (parse_port(colon + 1, &pat->port) < 0)
            return err_set(err, -EINVAL,
                           ALLOW_KEY " entry '%s' has a port that is not a number 1..65535", entry);
    }
    char name[NAME_MAX_LEN + 2];
    if (normalize(e, name) < 0)
        return err_set(err, -EINVAL, ALLOW_KEY " entry '%.40s...' is longer than %d bytes", entry,
                       NAME_MAX_LEN);
    const char *n = name;
    if (strcmp(n, "*") == 0)
        return err_set(err, -EINVAL,
                       ALLOW_KEY " entry '%s' would allow every name, which SANDBOX_NETWORK=public "
                                 "does",
                       entry);
    if (strncmp(n, "*.", 2) == 0) {
        pat->wildcard = true;
        n += 2;
    }
    if (strchr(n, '*'))
        return err_set(
            err, -EINVAL,
            ALLOW_KEY " entry '%s' has a '*' that does not begin it, as in *.example.org", entry);
    if (egress_name_valid(n)) {
        snprintf(pat->name, sizeof(pat->name), "%s", n);
        return 0;
    }
    struct in_addr v4;
    if (!pat->wildcard && inet_aton(n, &v4) != 0)
        return address_entry(entry, err);
    for (const char *c = n; *c; c++)
        if ((unsigned char)*c >= 0x80)
            return err_set(err, -EINVAL,
                           ALLOW_KEY " entry '%s' is not a host name: write an internationalized "
                                     "name in its xn-- form",
                           entry);
    return err_set(err, -EINVAL,
                   ALLOW_KEY " entry '%s' is not a host name (labels of 1..63 letters, digits, "
                             "'-' or '_' between dots, the last not all digits) or *.name, with "
                             "an optional :port",
                   entry);
}

static int add_pattern(struct egress_policy *p, const char *text, struct err *err)
{
    char e[NAME_MAX_LEN + 16];
    if (strlen(text) >= sizeof(e))
        return err_set(err, -EINVAL, ALLOW_KEY " entry '%.40s...' is longer than %d bytes", text,
                       NAME_MAX_LEN);
    snprintf(e, sizeof(e), "%s", text);
    return parse_pattern(e, &p->patterns[p->n_patterns++], err);
}

static int parse_patterns(struct egress_policy *p, const char *spec, struct err *err)
{
    int listed = 0;
    for (const char *s = spec; s && *s;) {
        size_t len = strcspn(s, ",");
        const char *b = s, *e = s + len;
        s += len + (s[len] == ',');
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        if (b == e)
            continue;
        if (++listed > EGRESS_PATTERNS_MAX)
            return err_set(err, -EINVAL, ALLOW_KEY " has more than %d entries",
                           EGRESS_PATTERNS_MAX);
        char text[NAME_MAX_LEN + 16];
        if ((size_t)(e - b) >= sizeof(text))
            return err_set(err, -EINVAL, ALLOW_KEY " entry '%.40s...' is longer than %d bytes", b,
                           NAME_MAX_LEN);
        memcpy(text, b, (size_t)(e - b));
        text[e - b] = '\0';
        int r = add_pattern(p, text, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int egress_policy_new_with_own(const struct config *cfg, const struct egress_addr *own, int n_own,
                               struct egress_policy **out, struct err *err)
{
    struct egress_policy *p = xcalloc(1, sizeof(*p));
    const char *v = config_get(cfg, "SANDBOX_NETWORK");
    p->mode = EGRESS_MODE_ALLOWLIST;
    uint64_t defaults = 1;
    int r;
    if (v && egress_mode_parse(v, &p->mode) < 0)
        r = err_set(err, -EINVAL, "SANDBOX_NETWORK '%s' is not none, allowlist or public", v);
    else
        r = config_get_u64(cfg, "SANDBOX_NETWORK_DEFAULTS", 1, 0, 1, &defaults, err);
    p->defaults = r == 0 && defaults == 1;
    for (size_t i = 0; r == 0 && p->defaults && i < BUILTIN_N; i++)
        r = add_pattern(p, builtin_patterns[i], err);
    if (r == 0)
        r = parse_patterns(p, config_get(cfg, ALLOW_KEY), err);
    if (r == 0)
        r = egress_rules_parse_key(config_get(cfg, "SANDBOX_NETWORK_ADDRS"),
                                   "SANDBOX_NETWORK_ADDRS", &p->addrs, err);
    if (r < 0) {
        free(p);
        return r;
    }
    for (int i = 0; i < n_own && p->n_own < OWN_ADDRS_MAX; i++) {
        bool seen = false;
        for (int k = 0; k < p->n_own && !seen; k++)
            seen = memcmp(&p->own[k], &own[i], sizeof(own[i])) == 0;
        if (!seen)
            p->own[p->n_own++] = own[i];
    }
    *out = p;
    return 0;
}

int egress_policy_new(const struct config *cfg, struct egress_policy **out, struct err *err)
{
    int r = egress_local_init(err);
    if (r < 0)
        return r;
    r = egress_policy_new_with_own(cfg, NULL, 0, out, err);
    if (r == 0)
        (*out)->ask_kernel = true;
    return r;
}

void egress_policy_free(struct egress_policy *p)
{
    free(p);
}

enum egress_mode egress_policy_mode(const struct egress_policy *p)
{
    return p->mode;
}

static bool pattern_port_ok(const struct pattern *pat, uint16_t port)
{
    return pat->port ? port == pat->port : port == 80 || port == 443;
}

static bool pattern_name_ok(const struct pattern *pat, const char *name)
{
    if (!pat->wildcard)
        return strcmp(name, pat->name) == 0;
    size_t n = strlen(name), s = strlen(pat->name);
    return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, pat->name) == 0;
}

/* The ports the patterns matching name open, for a message: "80 and 443", "4873". */
static void ports_of(const struct egress_policy *p, const char *name, char *out, size_t size)
{
    uint16_t ports[8];
    int n = 0;
    bool more = false;
    for (int i = 0; i < p->n_patterns; i++) {
        if (!pattern_name_ok(&p->patterns[i], name))
            continue;
        uint16_t add[2] = {p->patterns[i].port ? p->patterns[i].port : 80,
                           p->patterns[i].port ? 0 : 443};
        for (int k = 0; k < 2 && add[k]; k++) {
            bool seen = false;
            for (int j = 0; j < n; j++)
                seen = seen || ports[j] == add[k];
            if (seen)
                continue;
            if (n == 8)
                more = true;
            else
                ports[n++] = add[k];
        }
    }
    size_t len = 0;
    out[0] = '\0';
    for (int j = 0; j < n && len < size; j++)
        len += (size_t)snprintf(out + len, size - len, "%s%u",
                                j == 0                ? ""
                                : j == n - 1 && !more ? " and "
                                                      : ", ",
                                ports[j]);
    if (more && len < size)
        snprintf(out + len, size - len, ", ...");
}

enum egress_reason egress_policy_check_name(const struct egress_policy *p, enum egress_mode mode,
                                            const char *host, uint16_t port, struct err *why)
{
    char hp[NAME_MAX_LEN + 16];
    host_port(host, port, hp);
    mode = egress_mode_narrow(mode, p->mode);
    if (mode == EGRESS_MODE_NONE) {
        err_set(why, -EACCES, "%s: this sandbox has no network (mode none)", hp);
        return EGRESS_DENY_MODE_NONE;
    }
    char name[NAME_MAX_LEN + 2];
    struct egress_addr addr;
    bool is_addr = normalize(host, name) == 0 && egress_addr_parse(name, &addr) == 0;
    if (!is_addr && (name[0] == '\0' || !egress_name_valid(name))) {
        char h[NAME_MAX_LEN + 1];
        shown(host, h);
        err_set(why, -EACCES, "'%s' is neither a host name nor an address", h);
        return EGRESS_DENY_NOT_LISTED;
    }
    if (port == 0) {
        err_set(why, -EACCES, "%s: 0 is not a port", hp);
        return EGRESS_DENY_PORT;
    }
    if (mode == EGRESS_MODE_PUBLIC)
        return EGRESS_OK;
    if (is_addr) {
        if (egress_decide(&p->addrs, name, &addr, port) == EGRESS_ALLOWED_BY_RULE)
            return EGRESS_OK;
        err_set(why, -EACCES,
                "%s is an address, not a name on the allow list; the operator may allow it with "
                "SANDBOX_NETWORK_ADDRS",
                hp);
        return EGRESS_DENY_NOT_LISTED;
    }
    bool name_listed = false;
    for (int i = 0; i < p->n_patterns; i++) {
        if (!pattern_name_ok(&p->patterns[i], name))
            continue;
        if (pattern_port_ok(&p->patterns[i], port))
            return EGRESS_OK;
        name_listed = true;
    }
    if (name_listed) {
        char ports[64];
        ports_of(p, name, ports, sizeof(ports));
        err_set(why, -EACCES,
                "%s is allowed on port%s %s only, not %u; the operator may allow it with "
                "SANDBOX_NETWORK_ALLOW=%s:%u",
                name, strpbrk(ports, ", ") ? "s" : "", ports, port, name, port);
        return EGRESS_DENY_PORT;
    }
    err_set(why, -EACCES, "%s is not on the allow list (%s); the operator may add it to %s", hp,
            p->defaults ? "SANDBOX_NETWORK_ALLOW and the built-in registries and git hosts"
                        : "SANDBOX_NETWORK_ALLOW",
            ALLOW_KEY);
    return EGRESS_DENY_NOT_LISTED;
}

static bool is_own(const struct egress_policy *p, const struct egress_addr *a)
{
    if (p->ask_kernel)
        return egress_addr_is_local(a);
    for (int i = 0; i < p->n_own; i++)
        if (memcmp(&p->own[i], a, sizeof(*a)) == 0)
            return true;
    return false;
}

/* Whether an entry of SANDBOX_NETWORK_ADDRS names exactly a (or the name host) on port: what
 * opens one of the host's own addresses, which a network that merely contains it does not. */
static bool named_exactly(const struct egress_policy *p, const char *host,
                          const struct egress_addr *a, uint16_t port)
{
    for (int i = 0; i < p->addrs.n; i++) {
        const struct egress_rule *r = &p->addrs.rule[i];
        if (r->port && r->port != port)
            continue;
        if (r->is_host ? strcmp(host, r->host) == 0
                       : r->prefix == 128 && memcmp(&r->net, a, sizeof(*a)) == 0)
            return true;
    }
    return false;
}

enum egress_reason egress_policy_check_addrs(const struct egress_policy *p, const char *host,
                                             const struct egress_addr *a, int n, uint16_t port,
                                             struct err *why)
{
    char hp[NAME_MAX_LEN + 16];
    host_port(host, port, hp);
    if (n <= 0) {
        err_set(why, -EHOSTUNREACH, "%s: the name has no address", hp);
        return EGRESS_DENY_UNRESOLVED;
    }
    char name[NAME_MAX_LEN + 2];
    normalize(host, name); /* too long for a name: "" */
    struct egress_addr literal;
    bool is_addr = egress_addr_parse(name, &literal) == 0;
    for (int i = 0; i < n; i++) {
        char text[EGRESS_ADDR_TEXT_MAX];
        egress_addr_format(&a[i], text);
        enum egress_class cls = egress_classify(&a[i]);
        char what[NAME_MAX_LEN + 64];
        if (is_addr)
            snprintf(what, sizeof(what), "%s is", hp);
        else
            snprintf(what, sizeof(what), "%s resolves to %s,", hp, text);
        if (is_own(p, &a[i])) {
            if (named_exactly(p, name, &a[i], port))
                continue;
            err_set(why, -EACCES,
                    "%s an address of this server's own host (%s); the operator may allow it by "
                    "naming %s itself in SANDBOX_NETWORK_ADDRS",
                    what, egress_class_name(cls), text);
            return EGRESS_DENY_SELF;
        }
        if (egress_decide(&p->addrs, name, &a[i], port) != EGRESS_DENIED)
            continue;
        err_set(why, -EACCES, "%s %s; the operator may allow it with SANDBOX_NETWORK_ADDRS", what,
                egress_class_name(cls));
        return EGRESS_DENY_ADDRESS;
    }
    return EGRESS_OK;
}

bool egress_policy_needs_sni(const struct egress_policy *p, enum egress_mode mode, const char *host)
{
    char name[NAME_MAX_LEN + 2];
    struct egress_addr addr;
    if (egress_mode_narrow(mode, p->mode) != EGRESS_MODE_ALLOWLIST)
        return false;
    return normalize(host, name) < 0 || egress_addr_parse(name, &addr) < 0;
}

enum egress_reason egress_policy_check_sni(const struct egress_policy *p, enum egress_mode mode,
                                           const char *host, const struct egress_hello *hello,
                                           struct err *why)
{
    if (!egress_policy_needs_sni(p, mode, host))
        return EGRESS_OK;
    char name[NAME_MAX_LEN + 2], sni[NAME_MAX_LEN + 2], h[NAME_MAX_LEN + 1];
    normalize(host, name);
    shown(host, h);
    if (!hello) {
        err_set(why, -EACCES,
                "the tunnel to %s did not begin with a TLS ClientHello; in allowlist mode a "
                "tunnel carries TLS for the name it was opened for (plain HTTP goes as "
                "http://%s/...)",
                h, h);
        return EGRESS_DENY_SNI;
    }
    if (hello->ech) {
        err_set(why, -EACCES,
                "the TLS ClientHello to %s hides the name it asks for (encrypted client hello); "
                "in allowlist mode turn ECH off",
                h);
        return EGRESS_DENY_SNI;
    }
    if (!hello->has_sni) {
        err_set(why, -EACCES,
                "the TLS ClientHello to %s names no server (SNI); in allowlist mode it must "
                "name %s",
                h, h);
        return EGRESS_DENY_SNI;
    }
    if (normalize(hello->sni, sni) < 0 || strcmp(sni, name) != 0) {
        err_set(why, -EACCES,
                "the TLS ClientHello in the tunnel to %s names another server, %s; in allowlist "
                "mode a tunnel reaches only the name it was opened for",
                h, hello->sni);
        return EGRESS_DENY_SNI;
    }
    return EGRESS_OK;
}
