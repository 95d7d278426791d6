/* Type sniffing for READ: a text file's mime type from its name, a binary one's from its magic
 * bytes, whether the start of a file is an SVG's, and whether image bytes are a whole image.
 * Pure: bytes in, an answer out, no file system and no allocation. */
#include "sandbox/fsops.h"
#include "sandbox/fsops_internal.h"

#include <string.h>
#include <strings.h>

#include "base/cleanup.h"

const char *fsop_text_mime_type(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {"txt", "text/plain"},
        {"py", "text/x-python"},
        {"js", "text/javascript"},
        {"mjs", "text/javascript"},
        {"cjs", "text/javascript"},
        {"jsx", "text/javascript"},
        {"ts", "text/x-typescript"},
        {"mts", "text/x-typescript"},
        {"tsx", "text/x-typescript"},
        {"json", "application/json"},
        {"md", "text/markdown"},
        {"markdown", "text/markdown"},
        {"html", "text/html"},
        {"htm", "text/html"},
        {"css", "text/css"},
        {"sh", "text/x-shellscript"},
        {"bash", "text/x-shellscript"},
        {"c", "text/x-c"},
        {"h", "text/x-c"},
        {"cc", "text/x-c++"},
        {"cpp", "text/x-c++"},
        {"hpp", "text/x-c++"},
        {"go", "text/x-go"},
        {"rs", "text/x-rust"},
        {"java", "text/x-java"},
        {"rb", "text/x-ruby"},
        {"yaml", "application/yaml"},
        {"yml", "application/yaml"},
        {"toml", "application/toml"},
        {"xml", "application/xml"},
        {"svg", "image/svg+xml"},
        {"csv", "text/csv"},
        {"sql", "application/sql"},
        {"diff", "text/x-diff"},
        {"patch", "text/x-diff"},
    };
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base) /* no extension, or a dot file such as .bashrc */
        return "text/plain";
    for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
        if (strcasecmp(dot + 1, types[i].ext) == 0)
            return types[i].type;
    }
    return "text/plain";
}

bool fsop_svg_like(const unsigned char *p, size_t n)
{
    if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
        n -= 3;
    }
    while (n > 0 && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
        n--;
    }
    return n > 0 && *p == '<' && memmem(p, n, "<svg", 4) != NULL;
}

const char *fsop_binary_mime_type(const unsigned char *p, size_t n)
{
    static const struct {
        size_t off;
        const char *magic;
        size_t len;
        const char *type;
    } magics[] = {
        {0, "\x89PNG\r\n\x1a\n", 8, "image/png"},
        {0, "\xFF\xD8\xFF", 3, "image/jpeg"},
        {0, "GIF87a", 6, "image/gif"},
        {0, "GIF89a", 6, "image/gif"},
        {8, "WEBP", 4, "image/webp"}, /* after "RIFF" and a size, checked below */
        {0, "%PDF-", 5, "application/pdf"},
        {0, "PK\x03\x04", 4, "application/zip"},
        {0, "PK\x05\x06", 4, "application/zip"}, /* empty archive */
        {0, "\x1f\x8b", 2, "application/gzip"},
        {0,
         "\x7f"
         "ELF",
         4, "application/x-executable"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(magics); i++) {
        size_t end = magics[i].off + magics[i].len;
        if (n >= end && memcmp(p + magics[i].off, magics[i].magic, magics[i].len) == 0 &&
            (magics[i].off == 0 || memcmp(p, "RIFF", 4) == 0))
            return magics[i].type;
    }
    return "application/octet-stream";
}

bool fsop_image_type(const char *mime_type)
{
    static const char *const types[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
    for (size_t i = 0; i < ARRAY_SIZE(types); i++)
        if (strcmp(mime_type, types[i]) == 0)
            return true;
    return false;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool fsop_image_whole(const char *mime_type, const unsigned char *p, size_t n)
{
    if (strcmp(mime_type, "image/png") == 0) /* IHDR first, IEND last */
        return n >= 8 + 25 + 12 && memcmp(p + 8, "\0\0\0\x0dIHDR", 8) == 0 &&
               memcmp(p + n - 12, "\0\0\0\0IEND\xAE\x42\x60\x82", 12) == 0;
    if (strcmp(mime_type, "image/jpeg") == 0) /* the end of image marker */
        return n >= 4 && p[n - 2] == 0xFF && p[n - 1] == 0xD9;
    if (strcmp(mime_type, "image/gif") == 0) /* header, screen descriptor ... trailer */
        return n >= 14 && p[n - 1] == 0x3B;
    if (strcmp(mime_type, "image/webp") == 0) /* the RIFF size covers a VP8, VP8L or VP8X chunk */
        return n >= 20 && (uint64_t)le32(p + 4) + 8 <= n && le32(p + 4) >= 12 &&
               (memcmp(p + 12, "VP8 ", 4) == 0 || memcmp(p + 12, "VP8L", 4) == 0 ||
                memcmp(p + 12, "VP8X", 4) == 0);
    return false;
}
