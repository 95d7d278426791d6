/* Fuzz the reading of GitHub's webhook deliveries (src/github/webhook.c): the input's first line
 * is the event type (X-GitHub-Event), the rest the body. It must never crash or leak, and an
 * event it reads keeps webhook.h's promises: valid UTF-8 texts within their caps, names without
 * control characters, numbers never negative, a reason for what it ignores. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "github/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap || !utf8_valid(s, n))
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7F)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data, *nl = memchr(in, '\n', size);
    size_t tl = nl ? (size_t)(nl - in) : 0;
    char type[64];
    snprintf(type, sizeof(type), "%.*s", (int)(tl < sizeof(type) ? tl : sizeof(type) - 1), in);
    const char *body = nl ? nl + 1 : in;
    size_t blen = size - (size_t)(body - in);
    struct github_event ev;
    struct err err = {0};
    if (github_event_parse(type, body, blen, "@sandbox-mcp", &ev, &err) < 0) {
        if (ev.text || ev.hunk)
            __builtin_trap();
        return 0;
    }
    check_name(ev.repo, sizeof(ev.repo));
    check_name(ev.sender, sizeof(ev.sender));
    check_name(ev.head, sizeof(ev.head));
    check_name(ev.url, sizeof(ev.url));
    check_name(ev.path, sizeof(ev.path));
    check_name(ev.name, sizeof(ev.name));
    check_name(ev.why, sizeof(ev.why));
    if (ev.text && (strlen(ev.text) > GITHUB_BODY_MAX || !utf8_valid(ev.text, strlen(ev.text))))
        __builtin_trap();
    if (ev.hunk && (strlen(ev.hunk) > GITHUB_HUNK_MAX || !utf8_valid(ev.hunk, strlen(ev.hunk))))
        __builtin_trap();
    if (ev.pr < 0 || ev.line < 0 || (ev.kind == GITHUB_EV_IGNORED && !ev.why[0]))
        __builtin_trap();
    github_event_clear(&ev);
    return 0;
}
