/* libFuzzer target: the run engine's pure parts (src/runs/scripts.c) on what a sandbox, an agent
 * or a remote might print. The first byte picks the part; the rest is the text.
 * - the change list: never crashes, its lists keep their cap, its totals are never negative
 *   when the counts are not, and its JSON reads back;
 * - token redaction: the text keeps its length, redacting again changes nothing, and no JWT
 *   shape (checked by a plain scan of our own) is left; secret value redaction keeps it too;
 * - the clone's branch list: at most ten names, at most 300 bytes of names (and quotes);
 * - the clone reason is one of ours, and the model check agrees with a plain restatement. */
#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "runs/runs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool b64url(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* Whether s holds eyJ<b64>.eyJ<b64>.<b64> of more than 40 bytes, scanned from every "eyJ". */
static bool has_jwt(const char *s)
{
    for (const char *p = strstr(s, "eyJ"); p; p = strstr(p + 1, "eyJ")) {
        const char *q = p;
        while (b64url(*q))
            q++;
        if (*q != '.' || strncmp(q + 1, "eyJ", 3) != 0)
            continue;
        q++;
        while (b64url(*q))
            q++;
        if (*q != '.' || !b64url(q[1]))
            continue;
        q++;
        while (b64url(*q))
            q++;
        if (q - p > 40)
            return true;
    }
    return false;
}

static void changes(const char *text)
{
    char *out = scripts_parse_changes(text);
    if (!out)
        return; /* a branch that is not UTF-8 */
    json_t *c = json_loads(out, 0, NULL);
    if (!c || json_array_size(json_object_get(c, "files")) > SCRIPTS_CHANGES_LIST_MAX ||
        json_array_size(json_object_get(c, "commits")) > SCRIPTS_CHANGES_LIST_MAX ||
        !json_is_integer(json_object_get(c, "insertions")) ||
        json_integer_value(json_object_get(c, "files_changed")) !=
            (json_int_t)json_array_size(json_object_get(c, "files")))
        abort();
    json_decref(c);
    free(out);
}

static void redact(const char *text, size_t len)
{
    char *a = strdup(text);
    scripts_redact_tokens(a);
    if (strlen(a) != len || has_jwt(a))
        abort();
    char *b = strdup(a);
    scripts_redact_tokens(b);
    if (strcmp(a, b) != 0)
        abort();
    /* secret values (here, pieces of the text itself): the text keeps its length */
    char v1[9] = {0}, v2[5] = {0};
    memcpy(v1, text, len < 8 ? len : 8);
    if (len > 4)
        memcpy(v2, text + len - 4, 4);
    const char *values[] = {v1, v2};
    scripts_redact_values(b, values, 2);
    if (strlen(b) != len)
        abort();
    free(a);
    free(b);
}

static void branches(const char *text)
{
    char *copy = strdup(text);
    struct buf names;
    buf_init(&names, 0);
    unsigned long total;
    unsigned shown = scripts_clone_branches(copy, &names, &total);
    if (shown > 10 || (shown == 0 && names.len) || names.len > 300 + 4 * shown)
        abort();
    buf_release(&names);
    free(copy);
}

static void model(const char *m)
{
    const char *slash = strchr(m, '/');
    bool want = slash && slash != m && slash[1] && strlen(m) <= 120 &&
                strspn(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._:-@") ==
                    strlen(m);
    if (scripts_model_valid(m) != want)
        abort();
    const char *why = scripts_clone_reason(m);
    if (!why || !*why || strchr(why, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t len = strlen(text); /* the parts read C strings: up to the first NUL */
    switch (data[0] % 4) {
    case 0: changes(text); break;
    case 1: redact(text, len); break;
    case 2: branches(text); break;
    default: model(text); break;
    }
    free(text);
    return 0;
}
