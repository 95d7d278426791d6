/* Notifications: targets' URLs and the public-address rule on resolved addresses, signing,
 * the backoff schedule and Retry-After, what is sent, and the outbox in the store. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "base/util.h"
#include "harness.h"
#include "notify/notify.h"
#include "store/store.h"

static struct egress_addr addr(const char *text)
{
    struct egress_addr a;
    if (egress_addr_parse(text, &a) < 0)
        abort();
    return a;
}

TEST(urls_https_public_and_within_limits)
{
    struct err err = {0};
    struct notify_url u;
    CHECK_INT_EQ(notify_url_check("https://hooks.example.com/in/abc?token=x", NOTIFY_WEBHOOK, false,
                                  &u, &err),
                 0);
    CHECK_STR_EQ(u.host, "hooks.example.com");
    CHECK_INT_EQ(u.port, 443);
    CHECK(!u.http);
    CHECK_INT_EQ(notify_url_check("https://Example.COM.:8443", NOTIFY_WEBHOOK, false, &u, &err), 0);
    CHECK_STR_EQ(u.host, "example.com");
    CHECK_INT_EQ(u.port, 8443);
    CHECK_INT_EQ(notify_url_check("https://ntfy.sh/my_topic-1", NOTIFY_NTFY, false, &u, &err), 0);
    CHECK_INT_EQ(notify_url_check("https://push.example.org/ntfy/t0", NOTIFY_NTFY, false, &u, &err),
                 0);
    CHECK_INT_EQ(notify_url_check("https://[2001:4860::1]/x", NOTIFY_WEBHOOK, false, &u, &err), 0);
    CHECK_STR_EQ(u.host, "2001:4860::1");

    static const struct {
        const char *url;
        enum notify_kind kind;
        bool loopback;
        const char *why;
    } bad[] = {
        {"", NOTIFY_WEBHOOK, false, "empty"},
        {"http://example.com/x", NOTIFY_WEBHOOK, false, "https://"},
        {"ftp://example.com/x", NOTIFY_WEBHOOK, false, "https://"},
        {"example.com/x", NOTIFY_WEBHOOK, false, "not a URL"},
        {"https://user:pw@example.com/", NOTIFY_WEBHOOK, false, "user name or password"},
        {"https://example.com/#frag", NOTIFY_WEBHOOK, false, "fragment"},
        {"https://exa mple.com/", NOTIFY_WEBHOOK, false, "space"},
        {"https://example.com/caf\xc3\xa9", NOTIFY_WEBHOOK, false, "not ASCII"},
        {"https://10.1.2.3/hook", NOTIFY_WEBHOOK, false, "10.1.2.3 is a private address"},
        {"https://169.254.169.254/latest", NOTIFY_WEBHOOK, false, "link-local"},
        {"https://127.0.0.1/x", NOTIFY_WEBHOOK, true, "loopback"},
        {"https://127.1/x", NOTIFY_WEBHOOK, false, "loopback"},
        {"https://[::1]/x", NOTIFY_WEBHOOK, false, "loopback"},
        {"https://[fd00::1]/x", NOTIFY_WEBHOOK, false, "unique local"},
        {"https://100.64.0.1/x", NOTIFY_WEBHOOK, false, "carrier-grade NAT"},
        {"https://0.0.0.0/x", NOTIFY_WEBHOOK, false, "public addresses only"},
        {"http://127.0.0.1:8080/x", NOTIFY_WEBHOOK, false, "https://"},
        {"http://10.0.0.1:8080/x", NOTIFY_WEBHOOK, true, "https://"},
        {"http://localhost:8080/x", NOTIFY_WEBHOOK, true, "https://"},
        {"https://ntfy.sh/", NOTIFY_NTFY, false, "topic"},
        {"https://ntfy.sh", NOTIFY_NTFY, false, "topic"},
        {"https://ntfy.sh/a.b", NOTIFY_NTFY, false, "topic"},
        {"https://ntfy.sh/topic?x=1", NOTIFY_NTFY, false, "query"},
        {"https://ex_ample..com/", NOTIFY_WEBHOOK, false, "host"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err e = {0};
        int r = notify_url_check(bad[i].url, bad[i].kind, bad[i].loopback, NULL, &e);
        if (r == 0)
            fprintf(stderr, "  accepted: %s\n", bad[i].url);
        CHECK(r == -EINVAL || r == -EACCES);
        CHECK_STR_CONTAINS(e.msg, bad[i].why);
    }
    char longer[STORE_NOTIFY_URL_MAX + 40];
    snprintf(longer, sizeof(longer), "https://example.com/%0*d", STORE_NOTIFY_URL_MAX, 0);
    CHECK_INT_EQ(notify_url_check(longer, NOTIFY_WEBHOOK, false, NULL, &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "longer than 1024 bytes");
    /* the test form, only with its setting */
    CHECK_INT_EQ(notify_url_check("http://127.0.0.1:8080/x", NOTIFY_WEBHOOK, true, &u, &err), 0);
    CHECK(u.http);
    CHECK_INT_EQ(notify_url_check("http://[::1]:9/t", NOTIFY_NTFY, true, &u, &err), 0);
    /* a message never repeats the URL (its query may be a token) */
    CHECK_INT_EQ(notify_url_check("https://user:s3cret@example.com/?k=t0ken", NOTIFY_WEBHOOK, false,
                                  NULL, &err),
                 -EINVAL);
    CHECK(!strstr(err.msg, "s3cret") && !strstr(err.msg, "t0ken"));
}

TEST(addresses_public_only_on_what_the_name_resolved_to)
{
    struct err err = {0};
    struct notify_url u;
    CHECK_INT_EQ(notify_url_check("https://hooks.example.com/x", NOTIFY_WEBHOOK, true, &u, &err),
                 0);
    struct egress_addr good[] = {addr("93.184.216.34"), addr("2606:2800:220:1::1")};
    CHECK_INT_EQ(notify_addrs_check(&u, good, 2, &err), 0);
    static const struct {
        const char *addr, *cls;
    } refused[] = {
        {"10.0.0.7", "a private address"},
        {"192.168.1.1", "a private address"},
        {"172.16.0.1", "a private address"},
        {"127.0.0.1", "a loopback address"},
        {"::1", "a loopback address"},
        {"::ffff:127.0.0.1", "a loopback address"},
        {"169.254.169.254", "link-local"},
        {"fe80::1", "link-local"},
        {"fd12::1", "unique local"},
        {"100.64.1.1", "carrier-grade NAT"},
        {"0.0.0.0", "public addresses only"},
        {"224.0.0.1", "multicast"},
        {"64:ff9b::a00:1", "a private address"}, /* NAT64 of 10.0.0.1 */
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct egress_addr mixed[] = {good[0], addr(refused[i].addr)};
        struct err e = {0};
        CHECK_INT_EQ(notify_addrs_check(&u, mixed, 2, &e), -EACCES);
        CHECK_STR_CONTAINS(e.msg, "'hooks.example.com' resolves to");
        CHECK_STR_CONTAINS(e.msg, refused[i].cls);
        CHECK_STR_CONTAINS(e.msg, "notifications go to public addresses only");
    }
    CHECK_INT_EQ(notify_addrs_check(&u, good, 0, &err), -EHOSTUNREACH);
    /* the test form: its own loopback address and port, nothing else */
    CHECK_INT_EQ(notify_url_check("http://127.0.0.1:8080/x", NOTIFY_WEBHOOK, true, &u, &err), 0);
    struct egress_addr own = addr("127.0.0.1"), other = addr("127.0.0.2");
    CHECK_INT_EQ(notify_addrs_check(&u, &own, 1, &err), 0);
    CHECK_INT_EQ(notify_addrs_check(&u, &other, 1, &err), -EACCES);
    /* a name that resolves to loopback stays refused with the test setting on */
    CHECK_INT_EQ(notify_url_check("https://localhost:8080/x", NOTIFY_WEBHOOK, true, &u, &err), 0);
    CHECK_INT_EQ(notify_addrs_check(&u, &own, 1, &err), -EACCES);
    CHECK_STR_CONTAINS(err.msg, "'localhost' resolves to 127.0.0.1, a loopback address");
}

TEST(shown_url_hides_the_query)
{
    char out[128];
    notify_url_shown("https://example.com/hook?token=abc", out, sizeof(out));
    CHECK_STR_EQ(out, "https://example.com/hook?…");
    notify_url_shown("https://ntfy.sh/topic", out, sizeof(out));
    CHECK_STR_EQ(out, "https://ntfy.sh/topic");
}

TEST(secret_and_signature)
{
    char a[NOTIFY_SECRET_LEN + 1], b[NOTIFY_SECRET_LEN + 1];
    notify_secret_new(a);
    notify_secret_new(b);
    CHECK_INT_EQ(strlen(a), NOTIFY_SECRET_LEN);
    CHECK(strncmp(a, "whsec_", 6) == 0);
    CHECK(strcmp(a, b) != 0);
    CHECK_INT_EQ(strspn(a + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
                 43);
    /* HMAC-SHA256("whsec_test-secret", "1700000000." + body), computed elsewhere */
    char sig[NOTIFY_SIGNATURE_MAX];
    const char *body = "{\"id\":\"evt_1\"}";
    notify_sign("whsec_test-secret", 1700000000, body, strlen(body), sig);
    CHECK_STR_EQ(sig, "t=1700000000,v1="
                      "86504ca838957ec97acf37c1d76e9e0c2acdd8699c4965f24cab90b9bff876dc");
    /* another time, body or secret: another signature */
    char other[NOTIFY_SIGNATURE_MAX];
    notify_sign("whsec_test-secret", 1700000001, body, strlen(body), other);
    CHECK(strcmp(strchr(sig, ','), strchr(other, ',')) != 0);
    notify_sign("whsec_test-secreT", 1700000000, body, strlen(body), other);
    CHECK(strcmp(sig, other) != 0);
    notify_sign("whsec_test-secret", 1700000000, body, strlen(body) - 1, other);
    CHECK(strcmp(sig, other) != 0);
}

TEST(backoff_doubles_with_jitter_up_to_an_hour)
{
    int64_t base = 10000;
    for (int attempt = 1; attempt <= NOTIFY_ATTEMPTS_MAX + 3; attempt++) {
        int64_t full = base;
        for (int i = 1; i < attempt && full < NOTIFY_BACKOFF_MAX_MS; i++)
            full *= 2;
        if (full > NOTIFY_BACKOFF_MAX_MS)
            full = NOTIFY_BACKOFF_MAX_MS;
        int64_t lo = notify_backoff_ms(attempt, base, 0);
        int64_t hi = notify_backoff_ms(attempt, base, (uint64_t)full / 2);
        CHECK_INT_EQ(lo, full - full / 2);
        CHECK_INT_EQ(hi, full);
        for (uint64_t r = 1; r < 2000; r += 97) {
            int64_t d = notify_backoff_ms(attempt, base, r * 7919);
            CHECK(d >= lo && d <= hi);
        }
    }
    CHECK_INT_EQ(notify_backoff_ms(1, 10000, 0), 5000);
    CHECK_INT_EQ(notify_backoff_ms(2, 10000, 0), 10000);
    CHECK_INT_EQ(notify_backoff_ms(3, 10000, 0), 20000);
    CHECK(notify_backoff_ms(100, 10000, 12345) <= NOTIFY_BACKOFF_MAX_MS);
}

TEST(retry_after_seconds_or_date)
{
    int64_t now = 1700000000000;
    CHECK_INT_EQ(notify_retry_after_ms("120", now), 120000);
    CHECK_INT_EQ(notify_retry_after_ms(" 0 ", now), 0);
    CHECK_INT_EQ(notify_retry_after_ms("Tue, 14 Nov 2023 22:14:20 GMT", now), 60000);
    CHECK_INT_EQ(notify_retry_after_ms("Tue, 14 Nov 2023 22:00:00 GMT", now), 0);
    CHECK_INT_EQ(notify_retry_after_ms("soon", now), -1);
    CHECK_INT_EQ(notify_retry_after_ms("-5", now), -1);
    CHECK(notify_retry_after_ms("99999999999999", now) > NOTIFY_BACKOFF_MAX_MS);
}

TEST(payload_and_ntfy_message)
{
    char summary[3000];
    memset(summary, 'x', sizeof(summary));
    memcpy(summary + 997, "\xc3\xa9\xc3\xa9", 4); /* é across the cut */
    summary[sizeof(summary) - 1] = '\0';
    struct notify_event ev = {.id = "evt_abc",
                              .type = "run.failed",
                              .at = 1700000000000,
                              .run_id = "run_1",
                              .session_id = "ses_1",
                              .title = "Fix \xff the tests",
                              .status = "failed",
                              .summary = summary,
                              .url = "https://smcp.example/runs/run_1?t=abc",
                              .pull_request_url = NULL};
    char *text = notify_payload(&ev);
    json_t *j = json_loads(text, 0, NULL);
    CHECK(j != NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(j, "id")), "evt_abc");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "type")), "run.failed");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "created_at")), "2023-11-14T22:13:20.000Z");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "run_id")), "run_1");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "session_id")), "ses_1");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "status")), "failed");
    CHECK_STR_EQ(json_string_value(json_object_get(j, "title")), "Fix \xef\xbf\xbd the tests");
    const char *s = json_string_value(json_object_get(j, "summary"));
    CHECK(strlen(s) <= NOTIFY_SUMMARY_MAX);
    CHECK(strlen(s) >= NOTIFY_SUMMARY_MAX - 4);
    CHECK_STR_CONTAINS(s, "…");
    CHECK(json_object_get(j, "pull_request_url") == NULL);
    CHECK_INT_EQ(json_object_size(j), 9);

    struct notify_ntfy m;
    CHECK_INT_EQ(notify_ntfy_message(text, &m), 0);
    CHECK_STR_EQ(m.title, "Run failed");
    CHECK_INT_EQ(m.priority, 4);
    CHECK_STR_EQ(m.tags, "x");
    CHECK_STR_EQ(m.click, "https://smcp.example/runs/run_1?t=abc");
    CHECK(strncmp(m.body, "Fix \xef\xbf\xbd the tests\n\nxxx", 22) == 0);
    free(m.body);
    json_decref(j);
    free(text);

    ev.type = "pull_request.opened";
    ev.status = "running";
    ev.summary = "Done.";
    ev.pull_request_url = "https://github.com/acme/widget/pull/7";
    text = notify_payload(&ev);
    CHECK_INT_EQ(notify_ntfy_message(text, &m), 0);
    CHECK_STR_EQ(m.title, "Pull request opened");
    CHECK_INT_EQ(m.priority, 3);
    CHECK_STR_EQ(m.body,
                 "Fix \xef\xbf\xbd the tests\nhttps://github.com/acme/widget/pull/7\n\nDone.");
    free(m.body);
    free(text);
    /* a question: high priority, the question in the body, the page to answer it on a tap */
    ev.type = "run.question";
    ev.status = "running";
    ev.summary = "Which database should it use?";
    ev.pull_request_url = NULL;
    text = notify_payload(&ev);
    CHECK_INT_EQ(notify_ntfy_message(text, &m), 0);
    CHECK_STR_EQ(m.title, "Run asks you");
    CHECK_INT_EQ(m.priority, 4);
    CHECK_STR_EQ(m.tags, "question");
    CHECK_STR_EQ(m.click, "https://smcp.example/runs/run_1?t=abc");
    CHECK_STR_EQ(m.body, "Fix \xef\xbf\xbd the tests\n\nWhich database should it use?");
    free(m.body);
    free(text);
    CHECK_INT_EQ(notify_ntfy_message("{\"type\":\"other\"}", &m), -EINVAL);
    CHECK_INT_EQ(notify_ntfy_message("not json", &m), -EINVAL);
}

/* --- the outbox in the store --- */

static struct store *temp_store(void)
{
    char *path = test_temp_db();
    struct store *st = NULL;
    struct err err = {0};
    if (store_open(path, &st, &err) < 0)
        abort();
    free(path);
    return st;
}

static void make_run(struct store *st, const char *user_id, const char *id)
{
    struct store_session ses = {0};
    snprintf(ses.id, sizeof(ses.id), "ses_%s", id);
    snprintf(ses.user_id, sizeof(ses.user_id), "%s", user_id);
    snprintf(ses.agent, sizeof(ses.agent), "opencode");
    struct err err = {0};
    store_session_create(st, &ses, &err);
    struct store_run r = {0};
    snprintf(r.id, sizeof(r.id), "%s", id);
    snprintf(r.user_id, sizeof(r.user_id), "%s", user_id);
    snprintf(r.session_id, sizeof(r.session_id), "ses_%s", id);
    snprintf(r.model, sizeof(r.model), "m");
    snprintf(r.agent, sizeof(r.agent), "opencode");
    r.task = "a task";
    r.status_reason = "queued";
    if (store_run_insert(st, &r, &err) < 0)
        abort();
}

struct rows {
    int n;
    struct store_notify_row row[16];
};

static void collect(const struct store_notify_row *row, void *ctx)
{
    struct rows *r = ctx;
    if (r->n < 16) {
        r->row[r->n] = *row;
        r->row[r->n].payload = NULL;
        r->n++;
    }
}

static int hooked;
static void on_hook(void *ctx)
{
    (void)ctx;
    hooked++;
}

TEST(store_targets_secrets_and_caps)
{
    struct store *st = temp_store();
    struct err err = {0};
    struct store_user a, b;
    CHECK_INT_EQ(store_user_add(st, "alice", &a, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &b, &err), 0);
    unsigned char key[SEAL_KEY_BYTES] = {1, 2, 3};
    struct store_notify_target t[STORE_NOTIFY_TARGETS_MAX];
    for (int i = 0; i < STORE_NOTIFY_TARGETS_MAX; i++)
        CHECK_INT_EQ(store_notify_target_add(st, key, a.id, i ? "ntfy" : "webhook",
                                             "https://example.com/x", i ? NULL : "whsec_s", &t[i],
                                             &err),
                     0);
    CHECK_INT_EQ(
        store_notify_target_add(st, key, a.id, "ntfy", "https://example.com/y", NULL, NULL, &err),
        -EDQUOT);
    CHECK_STR_CONTAINS(err.msg, "remove one first");
    char *secret = NULL;
    CHECK_INT_EQ(store_notify_target_secret(st, key, t[0].id, &secret, &err), 0);
    CHECK_STR_EQ(secret, "whsec_s");
    free(secret);
    CHECK_INT_EQ(store_notify_target_secret(st, key, t[1].id, &secret, &err), 0);
    CHECK(secret == NULL);
    unsigned char wrong[SEAL_KEY_BYTES] = {9};
    CHECK_INT_EQ(store_notify_target_secret(st, wrong, t[0].id, &secret, &err), -EBADMSG);
    /* another user's target is not found, nor removed */
    struct store_notify_target got;
    CHECK_INT_EQ(store_notify_target_get(st, b.id, t[0].id, &got, &err), -ENOENT);
    CHECK_INT_EQ(store_notify_target_delete(st, b.id, t[0].id, &err), -ENOENT);
    char ev[64];
    CHECK_INT_EQ(store_notify_test(st, b.id, t[0].id, 1000, ev, &err), -ENOENT);
    CHECK_INT_EQ(store_notify_target_get(st, a.id, t[0].id, &got, &err), 0);
    CHECK_STR_EQ(got.kind, "webhook");
    CHECK_INT_EQ(store_notify_target_delete(st, a.id, t[0].id, &err), 0);
    CHECK_INT_EQ(store_notify_target_delete(st, a.id, t[0].id, &err), -ENOENT);
    store_close(st);
}

TEST(store_outbox_from_a_run_end_to_delivery)
{
    struct store *st = temp_store();
    struct err err = {0};
    struct store_user a, b;
    CHECK_INT_EQ(store_user_add(st, "alice", &a, &err), 0);
    CHECK_INT_EQ(store_user_add(st, "bob", &b, &err), 0);
    unsigned char key[SEAL_KEY_BYTES] = {1};
    struct store_notify_target w, n;
    CHECK_INT_EQ(store_notify_target_add(st, key, a.id, "webhook", "https://a.example/h", "whsec_x",
                                         &w, &err),
                 0);
    CHECK_INT_EQ(
        store_notify_target_add(st, key, a.id, "ntfy", "https://ntfy.sh/t", NULL, &n, &err), 0);
    store_set_notify_hook(st, on_hook, NULL);
    hooked = 0;
    make_run(st, a.id, "run_a");
    make_run(st, b.id, "run_b");
    /* running is not an end; the end queues one row per target of the run's user, in its
     * transaction, and tells the hook once */
    CHECK_INT_EQ(store_run_transition(st, "run_a", "running", "go", 1000, &err), 0);
    CHECK_INT_EQ(hooked, 0);
    CHECK_INT_EQ(store_run_transition(st, "run_a", "failed", "broke", 2000, &err), 0);
    CHECK_INT_EQ(hooked, 1);
    CHECK_INT_EQ(store_run_transition(st, "run_b", "succeeded", "done", 2000, &err), 0);
    CHECK_INT_EQ(hooked, 1); /* bob has no target */
    struct rows r = {0};
    CHECK_INT_EQ(store_notify_due(st, 1999, 16, 16, collect, &r, &err), 0);
    CHECK_INT_EQ(r.n, 0);
    CHECK_INT_EQ(store_notify_due(st, 2000, 16, 16, collect, &r, &err), 0);
    CHECK_INT_EQ(r.n, 2);
    char want[64];
    store_notify_event_id("run.failed", "run_a", want);
    CHECK_STR_EQ(r.row[0].event_id, want);
    CHECK_STR_EQ(r.row[1].event_id, want);
    CHECK_STR_EQ(r.row[0].type, "run.failed");
    CHECK_STR_EQ(r.row[0].run_id, "run_a");
    CHECK_INT_EQ(r.row[0].attempts, 0);
    /* the same event recorded again is the same rows */
    CHECK_INT_EQ(store_notify_event(st, "run.failed", "run_a", NULL, 2500, &err), 0);
    CHECK_INT_EQ(
        store_notify_event(st, "pull_request.opened", "run_a", "https://gh/p/1", 2500, &err), 0);
    CHECK_INT_EQ(
        store_notify_event(st, "pull_request.opened", "run_a", "https://gh/p/1", 2600, &err), 0);
    struct rows all = {0};
    CHECK_INT_EQ(store_notify_due(st, 9999, 16, 16, collect, &all, &err), 0);
    CHECK_INT_EQ(all.n, 4);
    struct rows fair = {0}; /* one user's rows take their turn */
    CHECK_INT_EQ(store_notify_due(st, 9999, 16, 1, collect, &fair, &err), 0);
    CHECK_INT_EQ(fair.n, 1);
    CHECK_INT_EQ(fair.row[0].n, all.row[0].n);
    struct store_notify_target bt;
    char bev[64];
    CHECK_INT_EQ(
        store_notify_target_add(st, key, b.id, "ntfy", "https://ntfy.sh/b", NULL, &bt, &err), 0);
    CHECK_INT_EQ(store_notify_test(st, b.id, bt.id, 3000, bev, &err), 0);
    struct rows turn = {0};
    CHECK_INT_EQ(store_notify_due(st, 9999, 2, 1, collect, &turn, &err), 0);
    CHECK_INT_EQ(turn.n, 2);
    CHECK_STR_EQ(turn.row[0].user_id, a.id);
    CHECK_STR_EQ(turn.row[1].event_id, bev);
    CHECK_INT_EQ(store_notify_target_delete(st, b.id, bt.id, &err), 0);
    /* claimed: counted, and not due again until the lease ends */
    int64_t row = r.row[0].n;
    CHECK_INT_EQ(store_notify_claim(st, row, 3000, 63000, &err), 0);
    CHECK_INT_EQ(store_notify_claim(st, row, 3000, 63000, &err), -EALREADY);
    CHECK_INT_EQ(store_notify_set_payload(st, row, "{\"id\":1}", &err), 0);
    CHECK_INT_EQ(store_notify_retry(st, row, 5000, "the answer was HTTP 500", &err), 0);
    int64_t next = 0;
    CHECK_INT_EQ(store_notify_next_due(st, &next, &err), 0);
    CHECK_INT_EQ(next, 2000);
    struct rows again = {0};
    CHECK_INT_EQ(store_notify_due(st, 5000, 16, 16, collect, &again, &err), 0);
    bool seen = false;
    for (int i = 0; i < again.n; i++)
        if (again.row[i].n == row) {
            seen = true;
            CHECK_INT_EQ(again.row[i].attempts, 1);
            CHECK_STR_EQ(again.row[i].last_error, "the answer was HTTP 500");
        }
    CHECK(seen);
    /* delivered: ended for good, and its target remembers */
    CHECK_INT_EQ(store_notify_claim(st, row, 5000, 65000, &err), 0);
    CHECK_INT_EQ(store_notify_end(st, row, true, NULL, 6000, &err), 0);
    CHECK_INT_EQ(store_notify_end(st, row, false, "late", 6500, &err), 0); /* no change */
    CHECK_INT_EQ(store_notify_target_get(st, a.id, r.row[0].target_id, &w, &err), 0);
    CHECK_STR_EQ(w.last_status, "delivered");
    CHECK_INT_EQ(w.last_at, 6000);
    CHECK_INT_EQ(store_notify_claim(st, row, 99999, 99999, &err), -EALREADY);
    /* ended rows go after a while; waiting ones stay; a removed target takes its rows along */
    CHECK_INT_EQ(store_notify_prune(st, 6001, &err), 1);
    struct rows left = {0};
    CHECK_INT_EQ(store_notify_due(st, 99999, 16, 16, collect, &left, &err), 0);
    CHECK_INT_EQ(left.n, 3);
    CHECK_INT_EQ(store_notify_target_delete(st, a.id, n.id, &err), 0);
    struct rows after = {0};
    CHECK_INT_EQ(store_notify_due(st, 99999, 16, 16, collect, &after, &err), 0);
    CHECK_INT_EQ(after.n, 1);
    store_close(st);
}

static void count_target(const struct store_notify_target *t, void *ctx)
{
    struct store_notify_target *out = ctx;
    *out = *t;
}

TEST(store_pending_cap_drops_and_says_so)
{
    struct store *st = temp_store();
    struct err err = {0};
    struct store_user a;
    CHECK_INT_EQ(store_user_add(st, "alice", &a, &err), 0);
    unsigned char key[SEAL_KEY_BYTES] = {1};
    struct store_notify_target t;
    CHECK_INT_EQ(
        store_notify_target_add(st, key, a.id, "ntfy", "https://ntfy.sh/t", NULL, &t, &err), 0);
    char ev[64];
    for (int i = 0; i < STORE_NOTIFY_PENDING_MAX; i++)
        CHECK_INT_EQ(store_notify_test(st, a.id, t.id, 1000 + i, ev, &err), 0);
    CHECK_INT_EQ(store_notify_test(st, a.id, t.id, 5000, ev, &err), -EDQUOT);
    CHECK_STR_CONTAINS(err.msg, "waiting to be sent");
    make_run(st, a.id, "run_a");
    CHECK_INT_EQ(store_run_transition(st, "run_a", "cancelled", "stop", 6000, &err), 0);
    struct store_notify_target listed = {0};
    CHECK_INT_EQ(store_notify_target_list(st, a.id, count_target, &listed, &err), 0);
    CHECK_INT_EQ(listed.pending, STORE_NOTIFY_PENDING_MAX);
    CHECK_STR_EQ(listed.last_status, "dropped");
    CHECK_STR_CONTAINS(listed.last_error, "an event was dropped");
    store_close(st);
}

TEST_MAIN()
