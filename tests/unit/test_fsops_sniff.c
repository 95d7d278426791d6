/* Type sniffing (src/sandbox/fsops_sniff.c): pure functions of a name or of bytes, tested here
 * without a file system; test_fsops checks the same answers through READ. */
#include <string.h>

#include "harness.h"
#include "sandbox/fsops.h"
#include "sandbox/fsops_internal.h"

#define BYTES(s) (const unsigned char *)(s), sizeof(s) - 1

TEST(text_types_come_from_the_extension)
{
    CHECK_STR_EQ(fsop_text_mime_type("/workspace/a.py"), "text/x-python");
    CHECK_STR_EQ(fsop_text_mime_type("/workspace/A.PY"), "text/x-python");
    CHECK_STR_EQ(fsop_text_mime_type("/w/index.HTML"), "text/html");
    CHECK_STR_EQ(fsop_text_mime_type("/w/x.tar.json"), "application/json");
    CHECK_STR_EQ(fsop_text_mime_type("/w/fix.patch"), "text/x-diff");
    CHECK_STR_EQ(fsop_text_mime_type("/w/logo.svg"), "image/svg+xml");
    /* no extension, a dot file, an unknown one, a dot in a directory's name */
    CHECK_STR_EQ(fsop_text_mime_type("/w/Makefile"), "text/plain");
    CHECK_STR_EQ(fsop_text_mime_type("/w/.bashrc"), "text/plain");
    CHECK_STR_EQ(fsop_text_mime_type("/w/a.unknownext"), "text/plain");
    CHECK_STR_EQ(fsop_text_mime_type("/w/dir.py/README"), "text/plain");
    CHECK_STR_EQ(fsop_text_mime_type("/w/a."), "text/plain");
    CHECK_STR_EQ(fsop_text_mime_type("/"), "text/plain");
}

TEST(svg_is_markup_holding_an_svg_element)
{
    CHECK(fsop_svg_like(BYTES("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")));
    CHECK(fsop_svg_like(BYTES("\xEF\xBB\xBF \r\n\t<?xml version=\"1.0\"?><!-- x --><svg>")));
    CHECK(fsop_svg_like(BYTES("<!DOCTYPE svg><svg/>")));
    CHECK(!fsop_svg_like(BYTES("")));
    CHECK(!fsop_svg_like(BYTES("   ")));
    CHECK(!fsop_svg_like(BYTES("text first <svg>")));
    CHECK(!fsop_svg_like(BYTES("<html><body></body></html>")));
    CHECK(!fsop_svg_like(BYTES("\xEF\xBB\xBF")));
    /* only n bytes count: the element past them is not seen */
    const unsigned char cut[] = "<x><svg>";
    CHECK(!fsop_svg_like(cut, 5));
}

TEST(binary_types_come_from_magic_bytes)
{
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\x89PNG\r\n\x1a\n....")), "image/png");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\xFF\xD8\xFF\xE0")), "image/jpeg");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("GIF87a")), "image/gif");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("GIF89a..")), "image/gif");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("RIFF\x10\0\0\0WEBPVP8 ")), "image/webp");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("%PDF-1.7")), "application/pdf");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("PK\x03\x04")), "application/zip");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("PK\x05\x06")), "application/zip");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\x1f\x8b\x08")), "application/gzip");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\x7f"
                                             "ELF\x02")),
                 "application/x-executable");
    /* WEBP at offset 8 only behind RIFF; a magic longer than what there is does not match */
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("RIFX\x10\0\0\0WEBPVP8 ")),
                 "application/octet-stream");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\x89PNG\r\n\x1a")), "application/octet-stream");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("")), "application/octet-stream");
    CHECK_STR_EQ(fsop_binary_mime_type(BYTES("\0\1\2\3")), "application/octet-stream");
}

TEST(image_types_are_the_ones_clients_display)
{
    CHECK(fsop_image_type("image/png"));
    CHECK(fsop_image_type("image/jpeg"));
    CHECK(fsop_image_type("image/gif"));
    CHECK(fsop_image_type("image/webp"));
    CHECK(!fsop_image_type("image/svg+xml"));
    CHECK(!fsop_image_type("application/pdf"));
    CHECK(!fsop_image_type("image/pngx"));
    CHECK(!fsop_image_type(""));
}

TEST(whole_images_end_as_their_format_ends)
{
    /* a 1x1 PNG as libpng writes it */
    static const unsigned char png[] = {
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48,
        0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00,
        0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78,
        0x9C, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00,
        0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    };
    CHECK(fsop_image_whole("image/png", png, sizeof(png)));
    CHECK(!fsop_image_whole("image/png", png, sizeof(png) - 1));
    CHECK(!fsop_image_whole("image/png", png, 8 + 25 + 11)); /* shorter than any PNG */
    unsigned char no_ihdr[sizeof(png)];
    memcpy(no_ihdr, png, sizeof(png));
    no_ihdr[15] = 'X';
    CHECK(!fsop_image_whole("image/png", no_ihdr, sizeof(no_ihdr)));

    CHECK(fsop_image_whole("image/jpeg", BYTES("\xFF\xD8\xFF\xE0\0\x10JFIF\0\xFF\xD9")));
    CHECK(!fsop_image_whole("image/jpeg", BYTES("\xFF\xD8\xFF\xE0\0\x10JFIF\0\xFF")));
    CHECK(!fsop_image_whole("image/jpeg", BYTES("\xFF\xD9")));

    CHECK(fsop_image_whole("image/gif", BYTES("GIF89a\x01\0\x01\0\x80\0\0\0\0\0;")));
    CHECK(!fsop_image_whole("image/gif", BYTES("GIF89a\x01\0\x01\0\x80\0\0\0\0\0")));
    CHECK(!fsop_image_whole("image/gif", BYTES("GIF89a\x01\0;")));

    CHECK(fsop_image_whole("image/webp", BYTES("RIFF\x0e\0\0\0WEBPVP8L\x02\0\0\0\x2f\0")));
    CHECK(fsop_image_whole("image/webp", BYTES("RIFF\x0c\0\0\0WEBPVP8X\x02\0\0\0\x2f\0")));
    /* the RIFF size says more than there is, too little, or no VP8 chunk */
    CHECK(!fsop_image_whole("image/webp", BYTES("RIFF\x10\0\0\0WEBPVP8L\x02\0\0\0\x2f\0")));
    CHECK(!fsop_image_whole("image/webp", BYTES("RIFF\x0b\0\0\0WEBPVP8L\x02\0\0\0\x2f\0")));
    CHECK(!fsop_image_whole("image/webp", BYTES("RIFF\x0e\0\0\0WEBPWAVE\x02\0\0\0\x2f\0")));
    CHECK(!fsop_image_whole("image/webp", BYTES("RIFF\x0e\0\0\0WEBPVP8L")));

    /* types that are not images never are whole ones */
    CHECK(!fsop_image_whole("application/pdf", BYTES("%PDF-1.7\n%%EOF")));
    CHECK(!fsop_image_whole("image/svg+xml", BYTES("<svg/>")));
}

TEST_MAIN()
