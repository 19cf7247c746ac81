/*
 * stepscope_viewer_assets.h — the viewer's static files, compiled into the binary.
 *
 * viewer/CMakeLists.txt turns every file of viewer/ (index.html, css/, js/) into
 * a byte array of a generated C source (library `stepscope_viewer_assets`), so
 * that `stepscope view` serves the viewer and `--html` inlines it without the
 * source tree. Paths are relative to viewer/, with '/' separators, e.g.
 * "index.html", "js/app.js".
 */
#ifndef STEPSCOPE_VIEWER_ASSETS_H
#define STEPSCOPE_VIEWER_ASSETS_H

#include <stddef.h>

typedef struct stepscope_viewer_asset {
  const char *path;          /* relative to viewer/, e.g. "js/app.js" */
  const char *content_type;  /* e.g. "text/javascript; charset=utf-8" */
  const unsigned char *data; /* the file's bytes (not NUL-terminated) */
  size_t size;
} stepscope_viewer_asset;

/* The asset with exactly this path, or NULL. */
const stepscope_viewer_asset *stepscope_viewer_asset_find(const char *path);

/* All assets, in path order; *count receives their number. */
const stepscope_viewer_asset *stepscope_viewer_assets(size_t *count);

#endif
