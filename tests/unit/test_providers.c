/* Provider files (src/proxy/providers.c): the embedded ones, PROXY_PROVIDERS_DIR, the "agent"
 * object, and the check run_task makes of a model against the LLM providers. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "harness.h"
#include "proxy/proxy_internal.h"

static const struct proxy_llm llms[] = {
    {"anthropic", "ANTHROPIC_API_KEY", true, PROXY_WIRE_ANTHROPIC, "/v1"},
    {"fakeco", "FAKECO_API_KEY", true, PROXY_WIRE_OPENAI_COMPATIBLE, ""},
    {"openai", "OPENAI_API_KEY", false, PROXY_WIRE_OPENAI, "/v1"},
};
#define NLLMS (sizeof(llms) / sizeof(llms[0]))

TEST(model_of_a_provider_with_a_key)
{
    struct err err = {0};
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "anthropic/claude-sonnet-4-5", &err), 0);
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "fakeco/vendor/model:free", &err), 0);
}

TEST(model_of_a_provider_without_a_key_names_the_setting)
{
    struct err err = {0};
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "openai/gpt-5", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "provider 'openai' has no key");
    CHECK_STR_CONTAINS(err.msg, "set OPENAI_API_KEY in .dev.vars");
    CHECK_STR_CONTAINS(err.msg, "providers with a key: anthropic, fakeco");
}

TEST(model_of_an_unknown_provider_lists_the_providers)
{
    struct err err = {0};
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "google/gemini-2.5-pro", &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "model 'google/gemini-2.5-pro': this server has no provider 'google'; "
                          "providers with a key: anthropic, fakeco; without one: openai (set "
                          "OPENAI_API_KEY)");
    /* a prefix of a name is not the name */
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "anthro/x", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "no provider 'anthro'");
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "anthropicx/x", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "no provider 'anthropicx'");
}

TEST(model_without_a_provider_says_the_form)
{
    struct err err = {0};
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "claude-sonnet-4-5", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg,
                       "not of the form provider/model (e.g. anthropic/claude-sonnet-4-5)");
    CHECK_STR_CONTAINS(err.msg, "providers with a key: anthropic, fakeco");
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "/claude", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "not of the form provider/model");
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "anthropic/", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "not of the form provider/model (e.g. anthropic/model-name)");
    CHECK_INT_EQ(proxy_llm_check(llms, NLLMS, "", &err), -EINVAL);
}

TEST(no_provider_with_a_key)
{
    struct err err = {0};
    const struct proxy_llm none[] = {
        {"anthropic", "ANTHROPIC_API_KEY", false, PROXY_WIRE_ANTHROPIC, "/v1"},
        {"openai", "OPENAI_API_KEY", false, PROXY_WIRE_OPENAI, "/v1"},
    };
    CHECK_INT_EQ(proxy_llm_check(none, 2, "anthropic/claude-sonnet-4-5", &err), -EINVAL);
    CHECK_STR_EQ(err.msg, "model 'anthropic/claude-sonnet-4-5': provider 'anthropic' has no key on "
                          "this server: set ANTHROPIC_API_KEY in .dev.vars or the server's "
                          "environment and restart it; no provider has a key yet; providers: "
                          "anthropic (set ANTHROPIC_API_KEY), openai (set OPENAI_API_KEY)");
    CHECK_INT_EQ(proxy_llm_check(NULL, 0, "anthropic/claude-sonnet-4-5", &err), -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "this server has no LLM provider");
}

TEST(a_long_list_is_cut_and_says_so)
{
    struct proxy_llm many[PROXY_PROVIDERS_MAX];
    char names[PROXY_PROVIDERS_MAX][32];
    for (int i = 0; i < PROXY_PROVIDERS_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "provider-with-a-long-name-%02d", i);
        many[i] = (struct proxy_llm){names[i], "SOME_LONG_SETTING_NAME_API_KEY", i % 2 == 0,
                                     PROXY_WIRE_OPENAI_COMPATIBLE, ""};
    }
    struct err err = {0};
    CHECK_INT_EQ(proxy_llm_check(many, PROXY_PROVIDERS_MAX, "x/y", &err), -EINVAL);
    size_t n = strlen(err.msg);
    CHECK(n < sizeof(err.msg) - 1);
    CHECK(n > 3 && strcmp(err.msg + n - 3, "…") == 0);
}

/* --- loading files --- */

static char dir[64];

/* A directory of provider files of one test's own */
static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/smcp-providers-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    const struct dirent *de;
    char path[512];
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void put(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void drop(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

static const struct provider *find(const struct provider *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    return NULL;
}

#define FAKECO                                                                                     \
    "{\"name\": \"fakeco\", \"upstream\": \"http://127.0.0.1:9/\", \"key_env\": "                  \
    "\"FAKECO_API_KEY\", \"key_header\": \"Authorization\", \"key_format\": \"Bearer {key}\", "    \
    "\"token_from\": [\"bearer\"], \"methods\": [\"POST\"], \"paths\": "                           \
    "[\"/v1/chat/completions\"], \"usage\": \"openai\", \"agent\": {\"format\": "                  \
    "\"openai-compatible\", \"base_path\": \"/v1\"}}"

TEST(embedded_providers)
{
    struct config cfg = {0};
    config_set(&cfg, "ANTHROPIC_API_KEY", "sk-ant");
    struct provider *list = NULL;
    size_t n = 0;
    struct err err = {0};
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), 0);
    const struct provider *a = find(list, n, "anthropic"), *o = find(list, n, "openai"),
                          *g = find(list, n, "github"), *r = find(list, n, "openrouter");
    CHECK(a && o && g && r);
    if (a && o && g && r) {
        CHECK(a->llm && o->llm && r->llm && !g->llm);
        CHECK_INT_EQ(a->wire, PROXY_WIRE_ANTHROPIC);
        CHECK_INT_EQ(o->wire, PROXY_WIRE_OPENAI);
        CHECK_INT_EQ(r->wire, PROXY_WIRE_OPENAI_COMPATIBLE);
        CHECK_STR_EQ(a->agent_path, "/v1");
        CHECK_STR_EQ(r->agent_path, "/api/v1");
        CHECK_STR_EQ(a->key_env, "ANTHROPIC_API_KEY");
        CHECK_STR_EQ(a->key, "sk-ant");
        CHECK(o->key == NULL || getenv("OPENAI_API_KEY")); /* from the environment, if at all */
        CHECK(provider_path_allowed(r, "/api/v1/chat/completions", 24));
    }
    for (size_t i = 1; i < n; i++)
        CHECK(strcmp(list[i - 1].name, list[i].name) < 0);
    providers_free(list, n);
    config_release(&cfg);
}

TEST(providers_dir_adds_and_replaces)
{
    setup();
    put("fakeco.json", FAKECO);
    put("openai.json", "{\"name\": \"openai\", \"upstream\": \"http://127.0.0.1:8/\", \"key_env\": "
                       "\"MY_OPENAI\", \"key_header\": \"authorization\", \"key_format\": "
                       "\"Bearer {key}\", \"agent\": {\"format\": \"openai\"}}");
    put("notes.txt", "not a provider");
    put(".hidden.json", "not JSON");
    struct config cfg = {0};
    config_set(&cfg, "PROXY_PROVIDERS_DIR", dir);
    config_set(&cfg, "FAKECO_API_KEY", "sk-fake");
    struct provider *list = NULL;
    size_t n = 0;
    struct err err = {0};
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), 0);
    const struct provider *f = find(list, n, "fakeco"), *o = find(list, n, "openai");
    CHECK(f && o);
    if (f && o) {
        CHECK(f->llm);
        CHECK_INT_EQ(f->wire, PROXY_WIRE_OPENAI_COMPATIBLE);
        CHECK_STR_EQ(f->agent_path, "/v1");
        CHECK_STR_EQ(f->upstream, "http://127.0.0.1:9");
        CHECK_STR_EQ(f->key_header, "authorization");
        CHECK_STR_EQ(f->key_value, "Bearer sk-fake");
        CHECK_STR_EQ(o->upstream, "http://127.0.0.1:8"); /* the directory's file replaced it */
        CHECK_STR_EQ(o->key_env, "MY_OPENAI");
        CHECK_STR_EQ(o->agent_path, "");
    }
    size_t openai = 0;
    for (size_t i = 0; i < n; i++)
        openai += strcmp(list[i].name, "openai") == 0;
    CHECK_INT_EQ(openai, 1);
    providers_free(list, n);
    config_release(&cfg);
    teardown();
}

static void refused(const char *file, const char *text, const char *why)
{
    put(file, text);
    struct config cfg = {0};
    config_set(&cfg, "PROXY_PROVIDERS_DIR", dir);
    struct provider *list = NULL;
    size_t n = 0;
    struct err err = {0};
    if (providers_load(&cfg, &list, &n, &err) == 0) {
        CHECK_FAIL_("%s was loaded: %s", file, text);
        providers_free(list, n);
    } else {
        CHECK_STR_CONTAINS(err.msg, why);
    }
    drop(file);
    config_release(&cfg);
}

TEST(providers_dir_refuses_bad_files)
{
    setup();
    const char *base = "\"upstream\": \"http://x\", \"key_env\": \"K\", \"key_header\": \"a\", "
                       "\"key_format\": \"{key}\"";
    char text[512];
    refused("broken.json", "{\"name\": ", "provider 'broken.json': line 1");
    refused("list.json", "[]", "not a JSON object");
    snprintf(text, sizeof(text), "{\"name\": \"other\", %s}", base);
    refused("mine.json", text, "must be the file's name");
    snprintf(text, sizeof(text), "{\"name\": \"Upper\", %s}", base);
    refused("Upper.json", text, "lowercase letters");
    snprintf(text, sizeof(text), "{\"name\": \"a,b\", %s}", base);
    refused("a,b.json", text, "lowercase letters");
    snprintf(text, sizeof(text), "{\"name\": \"x\", %s, \"agent\": {\"format\": \"gemini\"}}",
             base);
    refused("x.json", text, "agent.format is one of anthropic, openai, openai-compatible");
    snprintf(text, sizeof(text), "{\"name\": \"x\", %s, \"agent\": \"openai\"}", base);
    refused("x.json", text, "\"agent\" is not an object");
    static const char *const bad_paths[] = {"v1", "/v1/", "/../v1", "/v1?x", "//v1", "/a b"};
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        snprintf(
            text, sizeof(text),
            "{\"name\": \"x\", %s, \"agent\": {\"format\": \"openai\", \"base_path\": \"%s\"}}",
            base, bad_paths[i]);
        refused("x.json", text, "agent.base_path");
    }
    refused("x.json",
            "{\"name\": \"x\", \"upstream\": \"http://x\", \"key_header\": \"a\", \"key_format\": "
            "\"{key}\", \"agent\": {\"format\": \"openai\"}}",
            "an agent provider needs key_env");
    snprintf(text, sizeof(text), "{\"name\": \"x\", \"name\": \"x\", %s}", base);
    refused("x.json", text, "duplicate");
    /* too large */
    size_t big = 64 * 1024 + 1;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    huge[0] = '{';
    huge[big - 1] = '}';
    refused("huge.json", huge, "at most 65536 bytes");
    free(huge);
    /* a directory that is not there */
    struct config cfg = {0};
    config_set(&cfg, "PROXY_PROVIDERS_DIR", "/nonexistent/providers");
    struct provider *list = NULL;
    size_t n = 0;
    struct err err = {0};
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "PROXY_PROVIDERS_DIR '/nonexistent/providers'");
    config_release(&cfg);
    teardown();
}

/* The directory holds exactly p00.json ... p<count-1>.json */
static void fill(int count)
{
    char name[64], text[512];
    for (int i = 0; i <= PROXY_PROVIDERS_MAX; i++) {
        snprintf(name, sizeof(name), "p%02d.json", i);
        drop(name);
        snprintf(text, sizeof(text),
                 "{\"name\": \"p%02d\", \"upstream\": \"http://x\", \"key_header\": \"a\", "
                 "\"key_format\": \"{key}\"}",
                 i);
        if (i < count)
            put(name, text);
    }
}

TEST(providers_dir_holds_at_most_the_cap)
{
    setup();
    struct config cfg = {0};
    struct provider *list = NULL;
    size_t n = 0, builtin = 0;
    struct err err = {0};
    CHECK_INT_EQ(providers_load(&cfg, &list, &builtin, &err), 0);
    providers_free(list, builtin);
    config_set(&cfg, "PROXY_PROVIDERS_DIR", dir);
    fill(PROXY_PROVIDERS_MAX - (int)builtin);
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), 0);
    CHECK_INT_EQ(n, PROXY_PROVIDERS_MAX);
    providers_free(list, n);
    fill(PROXY_PROVIDERS_MAX - (int)builtin + 1);
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "more than 32 provider files");
    fill(PROXY_PROVIDERS_MAX + 1); /* refused while the directory is listed */
    CHECK_INT_EQ(providers_load(&cfg, &list, &n, &err), -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "has more than 32 provider files");
    config_release(&cfg);
    teardown();
}

TEST_MAIN()
