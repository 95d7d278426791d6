/* TLS on the main listener: the certificate and key as an OpenSSL context, built at start and
 * again on SIGHUP. A connection's SSL object holds a reference to the context it was accepted
 * with, and the gate holds one while the handshake runs, so a reload changes only what new
 * connections are offered and frees the old context when its last connection is gone.
 * ALPN offers h2 and http/1.1; the gate (gate.c) hands each connection to h2o's HTTP/2 or
 * HTTP/1 side by what the client chose. */
#include "http/http_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"

static const h2o_iovec_t alpn_protocols[] = {
    {H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}, {NULL, 0}};

/* OpenSSL's reason for the failure just seen (the first error queued: the later ones only say
 * where it went up), and its error queue emptied. */
static const char *ssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
        r = "no PEM data in it";
    snprintf(buf, cap, "%s", r ? r : "unknown error");
    ERR_clear_error();
    return buf;
}

/* Never ask for a passphrase (OpenSSL would prompt on the terminal). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

static int open_pem(const char *path, const char *what, FILE **ret, struct err *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return err_set(err, -errno, "cannot read TLS %s '%s': %s", what, path, strerror(errno));
    *ret = f;
    return 0;
}

int http_tls_context_new(const char *cert, const char *key, SSL_CTX **ret, struct err *err)
{
    char why[256];
    _cleanup_fclose_ FILE *kf = NULL, *cf = NULL;
    int r;
    if ((r = open_pem(cert, "certificate", &cf, err)) < 0 ||
        (r = open_pem(key, "key", &kf, err)) < 0)
        return r;
    EVP_PKEY *pkey = PEM_read_PrivateKey(kf, NULL, no_passphrase, NULL);
    if (!pkey)
        return err_set(err, -EINVAL,
                       "cannot load TLS key '%s': not a PEM private key, or one protected by a "
                       "passphrase (%s)",
                       key, ssl_reason(why, sizeof(why)));
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        EVP_PKEY_free(pkey);
        return err_set(err, -ENOMEM, "cannot create a TLS context: %s",
                       ssl_reason(why, sizeof(why)));
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        r = err_set(err, -EINVAL, "cannot load TLS certificate '%s': %s", cert,
                    ssl_reason(why, sizeof(why)));
    } else if (X509_check_private_key(SSL_CTX_get0_certificate(ctx), pkey) != 1) {
        ERR_clear_error();
        r = err_set(err, -EINVAL, "TLS key '%s' does not match certificate '%s'", key, cert);
    } else if (SSL_CTX_use_PrivateKey(ctx, pkey) != 1) {
        r = err_set(err, -EINVAL, "cannot use TLS key '%s': %s", key, ssl_reason(why, sizeof(why)));
    }
    EVP_PKEY_free(pkey);
    if (r < 0) {
        SSL_CTX_free(ctx);
        return r;
    }
    h2o_ssl_register_alpn_protocols(ctx, alpn_protocols);
    *ret = ctx;
    return 0;
}

void http_tls_describe(SSL_CTX *ctx, char *out, size_t cap)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    char subject[256] = "?", until[64] = "?";
    X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
    BIO *b = BIO_new(BIO_s_mem());
    if (b && ASN1_TIME_print(b, X509_get0_notAfter(x)) == 1) {
        int n = BIO_read(b, until, sizeof(until) - 1);
        until[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    snprintf(out, cap, "subject=\"%s\" not_after=\"%s\"", subject, until);
}

bool http_tls_selected_h2(h2o_socket_t *sock)
{
    h2o_iovec_t proto = h2o_socket_ssl_get_selected_protocol(sock);
    return h2o_memis(proto.base, proto.len, H2O_STRLIT("h2"));
}
