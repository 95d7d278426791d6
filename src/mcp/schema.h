#pragma once
/* A JSON Schema validator for the subset tool input schemas use: type (one or a list),
 * properties, required, additionalProperties (bool or schema), items, enum, const, minLength,
 * maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minItems, maxItems, anyOf,
 * oneOf, allOf, not, if/then/else, and $ref to "#" or "#/$defs/<name>" of the same schema.
 * Annotations ($schema, $id, $anchor, $defs, $comment, title, description, default, examples,
 * format, pattern, deprecated, readOnly, writeOnly, x-mcp-header) are accepted and not enforced.
 * Schemas are listed as written: nothing is stripped. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Validate value against schema. Returns true if valid; otherwise writes a message naming the
 * field and the rule ("field 'timeout': must be at most 600000") to msg. */
bool schema_validate(const json_t *schema, const json_t *value, char *msg, size_t msglen);

/* Check that a schema only uses keywords and shapes this validator understands; used when tools
 * are registered so that a typo in a built-in schema fails loudly at start. */
bool schema_check(const json_t *schema, char *msg, size_t msglen);
