/*
 * sc_json_skim.h — the one JSON skimmer of the project: finds a value in JSON text without
 * building a tree, for the small documents stepscope reads back (the trainer's metadata in
 * a trace, a checkpoint manifest). It never reads past the terminating NUL, bounds nesting
 * at 64 levels, and gives up (NULL) on anything malformed it has to walk through. The
 * Kineto importer has its own tokenizer (analyzer/src/io/json_stream.c) and fast path: it
 * reads gigabytes, where this reads kilobytes.
 */
#ifndef SC_JSON_SKIM_H
#define SC_JSON_SKIM_H

#include <stddef.h>

/* Past spaces, tabs and line ends. */
const char *sc_json_ws(const char *p);
/* p at '"': past the closing quote, or NULL when the string does not end. */
const char *sc_json_skip_string(const char *p);
/* Past one value (scalar, string, object or array; leading space skipped), or NULL. */
const char *sc_json_skip_value(const char *p);
/* The start of the value of member `key` (klen bytes) of the object at p, or NULL. */
const char *sc_json_member(const char *p, const char *key, size_t klen);
/* The start of the value at a dotted path of member names ("predicted.total") in the
 * object at json, or NULL. */
const char *sc_json_find(const char *json, const char *path);

#endif
