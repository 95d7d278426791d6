#pragma once
/* A JSON Schema validator for the subset tool input schemas use: type (one or a list),
 * properties, required, additionalProperties (bool or schema), items, enum, const, minLength,
 * maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minItems, maxItems, anyOf,
 * oneOf. Annotations ($schema, $defs, title, description, default, format, pattern) are accepted
 * and not enforced; $ref is not resolved, so built-in tools do not use it. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Validate value against schema. Returns true if valid; otherwise writes a message naming the
 * field and the rule ("field 'timeout': must be at most 600000") to msg. */
bool schema_validate(const json_t *schema, const json_t *value, char *msg, size_t msglen);

/* Check that a schema only uses keywords and shapes this validator understands; used when tools
 * are registered so that a typo in a built-in schema fails loudly at start. */
bool schema_check(const json_t *schema, char *msg, size_t msglen);
