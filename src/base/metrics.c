#include "base/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25,   0.5,   1,      2.5,   5,    10,    60};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct series {
    const char *family; /* static string */
    char labels[192];   /* rendered label set, e.g. route="/mcp",status="200" */
    double value;       /* counter or gauge */
    unsigned long long counts[NBUCKETS + 1];
    double sum;
    unsigned long long n;
};

struct family {
    const char *name;
    const char *help;
    const char *type;
};

static const struct family families[] = {
    {"sandbox_mcp_http_requests_total", "HTTP requests by route and status", "counter"},
    {"sandbox_mcp_http_request_duration_seconds", "HTTP request latency by route", "histogram"},
    {"sandbox_mcp_tool_calls_total", "MCP tools/call by tool and outcome", "counter"},
    {"sandbox_mcp_tool_call_duration_seconds", "MCP tools/call latency by tool", "histogram"},
    {"sandbox_mcp_egress_connections_total",
     "Connections of sandboxes through the egress proxy by verdict and reason", "counter"},
    {"sandbox_mcp_egress_bytes_total",
     "Bytes relayed by the egress proxy, up (sandbox to upstream) and down", "counter"},
    {"sandbox_mcp_notify_attempts_total",
     "Attempts to send a notification by target kind and outcome", "counter"},
    {"sandbox_mcp_signin_attempts_total", "Sign-in attempts by how and outcome", "counter"},
    {"sandbox_mcp_github_events_total",
     "GitHub webhook deliveries and polled events by outcome (acted on, or why ignored)",
     "counter"},
};

static struct series *series;
static size_t nseries;
static struct {
    char name[64];
    char help[128];
    double value;
} gauges[16];
static size_t ngauges;

/* Label values come from route names, tool names and status codes; escape anyway. */
static void escape_label(char *out, size_t cap, const char *v)
{
    size_t o = 0;
    for (; *v && o + 3 < cap; v++) {
        if (*v == '"' || *v == '\\') {
            out[o++] = '\\';
            out[o++] = *v;
        } else if (*v == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *v;
        }
    }
    out[o] = '\0';
}

static struct series *get(const char *family, const char *labels)
{
    for (size_t i = 0; i < nseries; i++)
        if (series[i].family == family && strcmp(series[i].labels, labels) == 0)
            return &series[i];
    series = xrealloc(series, (nseries + 1) * sizeof(*series));
    struct series *s = &series[nseries++];
    memset(s, 0, sizeof(*s));
    s->family = family;
    snprintf(s->labels, sizeof(s->labels), "%s", labels);
    return s;
}

static void observe(struct series *s, double v)
{
    size_t i = 0;
    while (i < NBUCKETS && v > buckets[i])
        i++;
    s->counts[i]++;
    s->sum += v;
    s->n++;
}

void metrics_http_request(const char *route, int status, double seconds)
{
    char r[96], labels[192];
    escape_label(r, sizeof(r), route);
    snprintf(labels, sizeof(labels), "route=\"%s\",status=\"%d\"", r, status);
    get(families[0].name, labels)->value += 1;
    snprintf(labels, sizeof(labels), "route=\"%s\"", r);
    observe(get(families[1].name, labels), seconds);
}

void metrics_tool_call(const char *tool, const char *outcome, double seconds)
{
    char t[96], labels[192];
    escape_label(t, sizeof(t), tool);
    snprintf(labels, sizeof(labels), "tool=\"%s\",outcome=\"%s\"", t, outcome);
    get(families[2].name, labels)->value += 1;
    snprintf(labels, sizeof(labels), "tool=\"%s\"", t);
    observe(get(families[3].name, labels), seconds);
}

void metrics_egress(const char *verdict, const char *reason, unsigned long long up,
                    unsigned long long down)
{
    char v[32], r[64], labels[192];
    escape_label(v, sizeof(v), verdict);
    escape_label(r, sizeof(r), reason);
    snprintf(labels, sizeof(labels), "verdict=\"%s\",reason=\"%s\"", v, r);
    get(families[4].name, labels)->value += 1;
    get(families[5].name, "direction=\"up\"")->value += (double)up;
    get(families[5].name, "direction=\"down\"")->value += (double)down;
}

void metrics_notify(const char *kind, const char *outcome)
{
    char k[32], o[32], labels[192];
    escape_label(k, sizeof(k), kind);
    escape_label(o, sizeof(o), outcome);
    snprintf(labels, sizeof(labels), "kind=\"%s\",outcome=\"%s\"", k, o);
    get(families[6].name, labels)->value += 1;
}

void metrics_signin(const char *how, const char *outcome)
{
    char h[32], o[32], labels[192];
    escape_label(h, sizeof(h), how);
    escape_label(o, sizeof(o), outcome);
    snprintf(labels, sizeof(labels), "how=\"%s\",outcome=\"%s\"", h, o);
    get(families[7].name, labels)->value += 1;
}

void metrics_github(const char *outcome)
{
    char o[64], labels[96];
    escape_label(o, sizeof(o), outcome);
    snprintf(labels, sizeof(labels), "outcome=\"%s\"", o);
    get(families[8].name, labels)->value += 1;
}

void metrics_gauge_set(const char *name, const char *help, double value)
{
    for (size_t i = 0; i < ngauges; i++)
        if (strcmp(gauges[i].name, name) == 0) {
            gauges[i].value = value;
            return;
        }
    if (ngauges == sizeof(gauges) / sizeof(gauges[0]))
        return;
    snprintf(gauges[ngauges].name, sizeof(gauges[ngauges].name), "%s", name);
    snprintf(gauges[ngauges].help, sizeof(gauges[ngauges].help), "%s", help);
    gauges[ngauges++].value = value;
}

static long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

/* Descriptors open, and threads, in this process: what a leak would grow. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static long threads(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long n = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %ld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

void metrics_render(struct buf *out)
{
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        const struct family *fam = &families[f];
        buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name, fam->type);
        for (size_t i = 0; i < nseries; i++) {
            struct series *s = &series[i];
            if (s->family != fam->name)
                continue;
            if (strcmp(fam->type, "histogram") != 0) {
                buf_printf(out, "%s{%s} %.0f\n", fam->name, s->labels, s->value);
                continue;
            }
            unsigned long long cum = 0;
            char base[80];
            snprintf(base, sizeof(base), "%.*s", (int)(strlen(fam->name)), fam->name);
            for (size_t b = 0; b <= NBUCKETS; b++) {
                cum += s->counts[b];
                if (b < NBUCKETS)
                    buf_printf(out, "%s_bucket{%s,le=\"%g\"} %llu\n", base, s->labels, buckets[b],
                               cum);
                else
                    buf_printf(out, "%s_bucket{%s,le=\"+Inf\"} %llu\n", base, s->labels, cum);
            }
            buf_printf(out, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", base, s->labels, s->sum, base,
                       s->labels, s->n);
        }
    }
    for (size_t i = 0; i < ngauges; i++)
        buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", gauges[i].name, gauges[i].help,
                   gauges[i].name, gauges[i].name, gauges[i].value);
    buf_printf(out,
               "# HELP process_resident_memory_bytes Resident memory size in bytes\n"
               "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n"
               "# HELP process_open_fds Number of open file descriptors\n"
               "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n"
               "# HELP process_threads Number of OS threads in the process\n"
               "# TYPE process_threads gauge\nprocess_threads %ld\n",
               resident_bytes(), open_fds(), threads());
}

void metrics_reset(void)
{
    free(series);
    series = NULL;
    nseries = 0;
    ngauges = 0;
}
