#pragma once
/* libcurl's multi-socket interface on the h2o loop: transfers run concurrently on the main
 * thread, none waits for another. Each curl_loop has a multi handle of its own (its own
 * connection cache); a module that makes upstream requests owns one. Main loop thread only. */

#include <curl/curl.h>

struct curl_loop;

/* A new multi handle watched by the loop. done runs on the loop once per finished easy handle,
 * after the handle has been removed from the multi handle, so done may free it (the transfer's
 * own state is what the caller set with CURLOPT_PRIVATE). Aborts when the descriptors it needs
 * cannot be made (at start). */
struct curl_loop *curl_loop_new(void (*done)(CURL *easy, CURLcode rc));
/* The caller removes (or has seen finish) every easy handle it added first. NULL is accepted.
 * Not from a done callback. */
void curl_loop_free(struct curl_loop *cl);
/* Start easy on the loop; done reports its end. */
void curl_loop_add(struct curl_loop *cl, CURL *easy);
/* Stop easy without calling done (the caller went away); closes its connection. */
void curl_loop_remove(struct curl_loop *cl, CURL *easy);
