#!/bin/sh
# Usage: embed.sh TABLE FILE...
# Writes C source to stdout that embeds each FILE as a NUL-terminated byte array and a table
# "const struct embedded_file TABLE[]" of {name, data, size} ending with a NULL name.
set -eu
table=$1
shift
echo '#include "base/embedded.h"'
i=0
for f in "$@"; do
    printf 'static const unsigned char %s_%d[] = {\n' "$table" "$i"
    od -An -v -tx1 "$f" | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
    printf '0x00};\n'
    i=$((i + 1))
done
printf 'const struct embedded_file %s[] = {\n' "$table"
i=0
for f in "$@"; do
    printf '    {"%s", (const char *)%s_%d, sizeof(%s_%d) - 1},\n' "$(basename "$f")" "$table" "$i" "$table" "$i"
    i=$((i + 1))
done
printf '    {0, 0, 0},\n};\n'
