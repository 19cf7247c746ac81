/*
 * kineto_reader.c — the event reader of the Kineto importer: the JSON token
 * stream (json_stream.c) turned into one `kevent` at a time (kineto_event.h),
 * each handed to the mapper (kineto_mapper.c) or, on the split import's
 * helper thread, to its store (kineto_split.c); and the document's other
 * top-level keys, and one import driven from start to finish. A file of its
 * own because it is the one part that knows the JSON: the mapper sees only
 * kevents, the file source only bytes (kineto_import.h says who does what).
 *
 * How it works: the document is pulled token by token. Top-level keys that
 * matter are `distributedInfo` (rank, world size, and in `pg_config` the
 * process groups that name a pipeline or data-parallel dimension), `deviceProperties`
 * (device names), `baseTimeNanoseconds` (newer Kineto writes `ts` relative
 * to it) and `traceEvents`; a top-level array is taken as the event list
 * itself. Each event object is read into one fixed-size `kevent` (only the
 * fields and args the mapping uses; everything else is skipped without
 * being stored) and converted at once. An event is first offered to
 * kineto_fast.c, which reads the common case whole over the buffer; what it
 * does not take is read here token by token, with every check and message
 * (next_element).
 *
 * Times: `ts` and `dur` are microseconds with up to three (or more)
 * decimals; they are converted to integer ns from their decimal text
 * (js_tok_scaled), never through a double, so
 * 1700000000123.456 us is exactly 1700000000123456 ns.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "json_stream.h"
#include "kineto_event.h"
#include "kineto_fast.h"
#include "kineto_import.h"
#include "kineto_split.h"

/* ---- small helpers ---- */

static int set_error(kimport *k, int code, uint64_t offset, const char *what) {
  if (k->err) {
    k->err->code = code;
    k->err->offset = offset;
    snprintf(k->err->message, sizeof k->err->message, "%s: byte %llu of the JSON text: %s", k->name,
             (unsigned long long)offset, what);
  }
  return code;
}

static int js_error(kimport *k) {
  return set_error(k, STEPSCOPE_E_FORMAT, k->js.error_offset, k->js.error);
}

/* A number token as u64 (negative or fractional: 0 returned, ok = 0). */
static int tok_u64(kimport *k, js_kind t, uint64_t *out) {
  if (t == JS_NUMBER) return js_tok_u64(&k->js, out);
  if (t == JS_STRING) {
    /* some producers quote numbers */
    char *end;
    unsigned long long v = strtoull(k->js.tok, &end, 10);
    if (end != k->js.tok && *end == 0 && k->js.tok[0] != '-') {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* pid / tid: a number, or a string (hashed; "Spans", "PyTorch Profiler"). */
static uint64_t tok_id(kimport *k, js_kind t) {
  uint64_t v = 0;
  if (t == JS_NUMBER) {
    int64_t s;
    if (js_tok_u64(&k->js, &v)) return v;
    if (js_number_i64(k->js.tok, &s)) return (uint64_t)s;
    return sc_fnv1a_str(SC_FNV1A_INIT, k->js.tok);
  }
  if (t == JS_STRING) return sc_fnv1a_str(SC_FNV1A_INIT, k->js.tok);
  return 0;
}

/* ---- args ---- */

static int read_u32_triple(kimport *k, js_kind t, uint32_t out[3]) {
  if (t != JS_BEGIN_ARRAY) return js_skip_rest(&k->js, t);
  for (int i = 0;; i++) {
    js_kind e = js_next(&k->js);
    if (e == JS_END_ARRAY) return 0;
    if (e == JS_ERROR) return -1;
    uint64_t v;
    if (e == JS_NUMBER && i < 3 && js_tok_u64(&k->js, &v))
      out[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    if (js_skip_rest(&k->js, e)) return -1;
  }
}

/* A CPU op's input value (its first token t) appended to ev->inputs as compact JSON: arrays,
 * strings (escaped again: '"', '\\' and control bytes), numbers (their text), true, false,
 * null; an object sets inputs_cut and is skipped. The same text as kineto_fast.c's
 * inputs_value. 0 or -1 (a JSON error). */
static int put_inputs(kimport *k, js_kind t) {
  kevent *ev = &k->ev;
  switch (t) {
  case JS_STRING:
    kevent_inputs_put(ev, "\"", 1);
    for (size_t i = 0; i < k->js.len; i++) {
      unsigned char c = (unsigned char)k->js.tok[i];
      char esc[8];
      if (c == '"' || c == '\\') {
        esc[0] = '\\';
        esc[1] = (char)c;
        kevent_inputs_put(ev, esc, 2);
      } else if (c < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04x", c);
        kevent_inputs_put(ev, esc, 6);
      } else {
        kevent_inputs_put(ev, (const char *)&c, 1);
      }
    }
    kevent_inputs_put(ev, "\"", 1);
    return 0;
  case JS_NUMBER: kevent_inputs_put(ev, k->js.tok, k->js.len); return 0;
  case JS_TRUE: kevent_inputs_put(ev, "true", 4); return 0;
  case JS_FALSE: kevent_inputs_put(ev, "false", 5); return 0;
  case JS_NULL: kevent_inputs_put(ev, "null", 4); return 0;
  case JS_BEGIN_ARRAY:
    kevent_inputs_put(ev, "[", 1);
    for (int i = 0;; i++) {
      js_kind e = js_next(&k->js);
      if (e == JS_END_ARRAY) break;
      if (e == JS_ERROR) return -1;
      if (i) kevent_inputs_put(ev, ",", 1);
      if (put_inputs(k, e)) return -1;
    }
    kevent_inputs_put(ev, "]", 1);
    return 0;
  default: ev->inputs_cut = 1; return js_skip_rest(&k->js, t);
  }
}

/* A "[memory]" event's args key (keep_memory): where its integer goes, or NULL. */
static int64_t *memory_arg(kevent *ev, const char *key) {
  if (!ev->keep_memory || ev->ph[0] != 'i') return NULL;
  if (!strcmp(key, "Total Allocated")) return &ev->mem_allocated;
  if (!strcmp(key, "Total Reserved")) return &ev->mem_reserved;
  if (!strcmp(key, "Bytes")) return &ev->mem_bytes;
  if (!strcmp(key, "Device Type")) return &ev->mem_device_type;
  if (!strcmp(key, "Device Id")) return &ev->mem_device_id;
  if (!strcmp(key, "Addr")) return (int64_t *)&ev->mem_addr;
  return NULL;
}

static int read_args(kimport *k) {
  kevent *ev = &k->ev;
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) return 0;
    if (t != JS_KEY) return -1;
    int64_t *mem = memory_arg(ev, k->js.tok);
    if (mem) {
      js_kind v = js_next(&k->js);
      if (v == JS_ERROR) return -1;
      int64_t x;
      uint64_t u;
      if (v == JS_NUMBER && mem == (int64_t *)&ev->mem_addr && js_tok_u64(&k->js, &u)) {
        ev->mem_addr = u;
        ev->has_mem = 1;
      } else if (v == JS_NUMBER && mem != (int64_t *)&ev->mem_addr &&
                 js_number_i64(k->js.tok, &x)) {
        *mem = x;
        ev->has_mem = 1;
      }
      if (js_skip_rest(&k->js, v)) return -1;
      continue;
    }
    int key = args_key(k->js.tok, k->js.len); /* the key text lives until the next token */
    if (kargs_field[key].fill == KA_INPUTS && inputs_wanted(ev)) {
      kevent_inputs_key(ev, k->js.tok, k->js.len);
      js_kind v = js_next(&k->js);
      if (v == JS_ERROR || put_inputs(k, v)) return -1;
      continue;
    }
    if (key == A_NONE || kargs_field[key].fill == KA_INPUTS) {
      if (js_skip(&k->js)) return -1;
      continue;
    }
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return -1;
    const kafield *f = &kargs_field[key];
    uint64_t u;
    switch (f->fill) {
    case KA_U64:
      if (tok_u64(k, v, &u)) kevent_set_u64(ev, f, u);
      break;
    case KA_TRIPLE:
      if (read_u32_triple(k, v, kevent_triple(ev, f))) return -1;
      continue;
    case KA_TEXT: /* a process group's name may be written as a number */
      if (v == JS_STRING || (v == JS_NUMBER && key == A_PG_NAME))
        copy_tok(kevent_text(ev, f), KSHORT, k->js.tok, k->js.len);
      break;
    case KA_RANKS:
      ev->pg_ranks[0] = 0;
      if (v == JS_STRING) {
        kevent_ranks_append(ev, k->js.tok, k->js.len);
      } else if (v == JS_BEGIN_ARRAY) {
        for (;;) {
          js_kind e = js_next(&k->js);
          if (e == JS_END_ARRAY) break;
          if (e == JS_ERROR) return -1;
          if (e == JS_NUMBER)
            kevent_ranks_append(ev, k->js.tok, k->js.len);
          else if (js_skip_rest(&k->js, e))
            return -1;
        }
        continue;
      }
      break;
    default: break;
    }
    if (js_skip_rest(&k->js, v)) return -1;
  }
}

/* Reads one event object (its '{' already consumed) into k->ev and converts
 * it (or, on the split helper's thread, stores it: kineto_split.h). */
static int read_event(kimport *k) {
  kevent *ev = &k->ev;
  kevent_clear(ev);
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) return js_error(k);
    int key = event_key(k->js.tok, k->js.len); /* the key text lives until the next token */
    if (key == E_NONE) {
      if (js_skip(&k->js)) return js_error(k);
      continue;
    }
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return js_error(k);
    switch (key) {
    case E_ARGS:
      if (v == JS_BEGIN_OBJECT && !args_unused(ev)) {
        if (read_args(k)) return js_error(k);
        continue;
      }
      break; /* skipped whole below (checked) */
    case E_PH:
      if (v == JS_STRING) copy_tok(ev->ph, sizeof ev->ph, k->js.tok, k->js.len);
      break;
    case E_CAT:
      if (v == JS_STRING) {
        ev->cat = cat_of(k->js.tok, k->js.len);
        if (ev->cat == KC_OTHER) copy_tok(ev->cat_text, sizeof ev->cat_text, k->js.tok, k->js.len);
      }
      break;
    case E_NAME:
      if (v == JS_STRING) {
        if (k->js.len >= sizeof ev->name) k->truncated_names++;
        copy_tok(ev->name, sizeof ev->name, k->js.tok, k->js.len);
        /* decoded strings hold no NUL (\u0000 becomes U+FFFD) */
        ev->name_len = k->js.len < sizeof ev->name ? k->js.len : sizeof ev->name - 1;
      }
      break;
    case E_TS:
    case E_DUR: {
      int64_t ns;
      if (v == JS_NUMBER) {
        /* an instant event read whole for its memory record (keep_memory) keeps the rule of
         * one skipped after its `ph` (skip_not_complete): a time that does not fit is no error;
         * the event has no time then, and ssa_kineto_convert counts it ignored, so `ops
         * --memory` imports what `analyze` imports */
        if (!js_tok_scaled(&k->js, 3, &ns)) {
          if (ev->keep_memory && ev->ph[0] == 'i' && !ev->ph[1]) break;
          return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                           key == E_TS ? "\"ts\" does not fit in 64-bit nanoseconds"
                                       : "\"dur\" does not fit in 64-bit nanoseconds");
        }
        if (key == E_TS) {
          ev->ts = ns;
          ev->has_ts = 1;
        } else {
          ev->dur = ns;
          ev->has_dur = 1;
        }
      }
      break;
    }
    case E_PID: ev->pid = tok_id(k, v); break;
    case E_TID:
      ev->tid = tok_id(k, v);
      if (v == JS_STRING) copy_str(ev->tid_name, sizeof ev->tid_name, k->js.tok);
      break;
    default: break;
    }
    if (js_skip_rest(&k->js, v)) return js_error(k);
    if ((key == E_CAT && skip_unimported(ev)) ||
        (key == E_PH && skip_after_ph(ev, ev->name, ev->name_len))) {
      if (js_skip_object_rest(&k->js)) return js_error(k);
      break;
    }
  }
  return k->store ? ssa_kineto_split_store(k) : ssa_kineto_convert(k);
}

/* The next element of the events array: an event is read (whole over the
 * buffer by kineto_fast.c when it can be, else token by token) and
 * converted, or stored on the split helper's thread; anything else is
 * skipped. *t says what came: JS_BEGIN_OBJECT (an event), JS_END_ARRAY (the
 * array's ']', its offset in tok_offset), another value, or JS_ERROR.
 * Returns 0 or an error code. */
static int next_element(kimport *k, js_kind *t) {
  const unsigned char *p = NULL, *e, *end;
  int have = 0;
  if (k->fast_next) {
    /* right after an event read whole: its ',' and the next element's
     * first byte found here, without the stream's bookkeeping (which
     * js_array_took then brings up to date) */
    e = k->js.in + k->js.in_len;
    p = skip_blank(k->fast_next, e);
    if (p < e && *p == ',') {
      p = skip_blank(p + 1, e);
      have = p < e;
    }
    k->fast_next = NULL;
  }
  if (k->fast && (have || js_array_peek(&k->js, &p, &e)) && *p == '{' &&
      (end = ssa_kineto_fast_event(&k->ev, p, e, &k->truncated_names, &k->templates))) {
    js_array_took(&k->js, end);
    k->fast_next = end;
    k->events_whole++;
    *t = JS_BEGIN_OBJECT;
    return k->store ? ssa_kineto_split_store(k) : ssa_kineto_convert(k);
  }
  *t = js_next(&k->js);
  if (*t == JS_ERROR) return js_error(k);
  if (*t == JS_BEGIN_OBJECT) {
    k->events_by_token++;
    return read_event(k);
  }
  if (*t == JS_END_ARRAY) return 0;
  return js_skip_rest(&k->js, *t) ? js_error(k) : 0;
}

int ssa_kineto_next_element(kimport *k, js_kind *t) {
  return next_element(k, t);
}

static int read_events(kimport *k) {
  for (;;) {
    js_kind t;
    int rc = next_element(k, &t);
    if (rc) return rc;
    if (t == JS_END_ARRAY) return 0;
    if (t == JS_BEGIN_OBJECT && k->split && k->js.in_len == ssa_split_point(k->split) &&
        (rc = ssa_kineto_split_handoff(k)))
      return rc;
  }
}

/* What a process group's description names: 1 the pipeline dimension (DeviceMesh's "mesh_pp",
 * or a description holding "pipe"), 2 the data-parallel one ("mesh_dp", "mesh_dp_replicate",
 * "mesh_dp_shard"...), 0 neither. */
static int group_role(const char *desc) {
  if (!strncmp(desc, "mesh_", 5)) desc += 5;
  if (!strcmp(desc, "pp") || strstr(desc, "pipe")) return 1;
  if (!strncmp(desc, "dp", 2) && (desc[2] == 0 || desc[2] == '_')) return 2;
  return 0;
}

/* Inside an array of objects (distributedInfo.pg_config, deviceProperties): moves into the next
 * object, after its '{' (1), or past the array's end (0), skipping other values; -1 on a JSON
 * error. */
static int next_array_object(kimport *k) {
  for (;;) {
    js_kind t = js_next(&k->js);
    if (t == JS_END_ARRAY) return 0;
    if (t == JS_BEGIN_OBJECT) return 1;
    if (t == JS_ERROR || js_skip_rest(&k->js, t)) return -1;
  }
}

/* Inside an object: its next key, in k->js.tok, with the ':' after it read (1), or past its
 * '}' (0); -1 on a JSON error. */
static int next_key(kimport *k) {
  js_kind m = js_next_member(&k->js);
  return m == JS_KEY ? 1 : m == JS_END_OBJECT ? 0 : -1;
}

/* A group's "ranks" array, after its '[': up to KGROUP_RANKS of them into ranks (*n); 1 when
 * one was not a rank or there were more, 0 else, -1 on a JSON error. */
static int read_ranks(kimport *k, int *ranks, int *n) {
  int overflow = 0;
  for (js_kind e = js_next(&k->js); e != JS_END_ARRAY; e = js_next(&k->js)) {
    uint64_t u;
    if (e == JS_NUMBER && js_tok_u64(&k->js, &u) && u < INT_MAX && *n < KGROUP_RANKS)
      ranks[(*n)++] = (int)u;
    else if (e == JS_ERROR || js_skip_rest(&k->js, e))
      return -1;
    else
      overflow = 1;
  }
  return overflow;
}

/* distributedInfo.pg_config: an array of {pg_desc, ranks: [...]}, one per process group this
 * rank is a member of (PyTorch lists no other); the pipeline and data-parallel ones are kept. */
static int read_groups(kimport *k) {
  int more;
  while ((more = next_array_object(k)) > 0) {
    char desc[KSHORT] = "";
    int ranks[KGROUP_RANKS], n = 0, bad = 0, key;
    while ((key = next_key(k)) > 0) {
      int is_desc = !strcmp(k->js.tok, "pg_desc"), is_ranks = !strcmp(k->js.tok, "ranks");
      js_kind v = js_next(&k->js);
      if (is_desc && v == JS_STRING) copy_str(desc, sizeof desc, k->js.tok);
      if (is_ranks && v == JS_BEGIN_ARRAY)
        bad |= read_ranks(k, ranks, &n);
      else if (js_skip_rest(&k->js, v))
        bad = -1;
      if (bad < 0) return js_error(k);
    }
    if (key < 0) return js_error(k);
    int role = group_role(desc);
    if (role == 0 || bad || n < 2) continue;
    memcpy(role == 1 ? k->pp_ranks : k->dp_ranks, ranks, (size_t)n * sizeof *ranks);
    *(role == 1 ? &k->npp_ranks : &k->ndp_ranks) = n;
  }
  return more < 0 ? js_error(k) : 0;
}

static int read_distributed_info(kimport *k) {
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) return 0;
    if (t != JS_KEY) return js_error(k);
    int is_rank = !strcmp(k->js.tok, "rank"), is_world = !strcmp(k->js.tok, "world_size");
    int is_host = !strcmp(k->js.tok, "host_name") || !strcmp(k->js.tok, "hostname");
    int is_groups = !strcmp(k->js.tok, "pg_config");
    js_kind v = js_next(&k->js);
    if (is_groups && v == JS_BEGIN_ARRAY) {
      int rc = read_groups(k);
      if (rc) return rc;
      continue;
    }
    if (is_host && v == JS_STRING && !k->host_name[0])
      copy_str(k->host_name, sizeof k->host_name, k->js.tok);
    uint64_t u;
    if ((is_rank || is_world) && v == JS_NUMBER && js_tok_u64(&k->js, &u) && u < INT_MAX) {
      if (is_rank) {
        k->rank = (int)u;
        k->has_rank = 1;
      } else
        k->world = (int)u;
    }
    if (js_skip_rest(&k->js, v)) return js_error(k);
  }
}

static int read_device_properties(kimport *k) {
  int more;
  while ((more = next_array_object(k)) > 0) {
    uint64_t id = UINT64_MAX;
    char name[KSHORT] = "";
    int key;
    while ((key = next_key(k)) > 0) {
      int is_id = !strcmp(k->js.tok, "id"), is_name = !strcmp(k->js.tok, "name");
      js_kind v = js_next(&k->js);
      if (is_id && v == JS_NUMBER) js_tok_u64(&k->js, &id);
      if (is_name && v == JS_STRING) copy_str(name, sizeof name, k->js.tok);
      if (js_skip_rest(&k->js, v)) return js_error(k);
    }
    if (key < 0) return js_error(k);
    if (id < KDEVICES && name[0] && !k->device_names[id]) {
      k->device_names[id] = strdup(name);
      if (!k->device_names[id]) return STEPSCOPE_E_NOMEM;
    }
  }
  return more < 0 ? js_error(k) : 0;
}

static int read_document(kimport *k) {
  js_kind t = js_next(&k->js);
  if (t == JS_BEGIN_ARRAY) return read_events(k); /* the JSON array form */
  if (t == JS_ERROR) return js_error(k);
  if (t != JS_BEGIN_OBJECT)
    return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                     "not a Kineto trace (expected a JSON object or array)");
  int saw_events = 0;
  for (;;) {
    t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) return js_error(k);
    char key[32];
    copy_str(key, sizeof key, k->js.tok);
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return js_error(k);
    int rc = 0;
    if (!strcmp(key, "traceEvents") && v == JS_BEGIN_ARRAY) {
      saw_events = 1;
      rc = read_events(k);
    } else if (!strcmp(key, "distributedInfo") && v == JS_BEGIN_OBJECT) {
      rc = read_distributed_info(k);
    } else if (!strcmp(key, "deviceProperties") && v == JS_BEGIN_ARRAY) {
      rc = read_device_properties(k);
    } else {
      if ((!strcmp(key, "host_name") || !strcmp(key, "hostname")) && v == JS_STRING &&
          !k->host_name[0])
        copy_str(k->host_name, sizeof k->host_name, k->js.tok);
      if (!strcmp(key, "baseTimeNanoseconds") && v == JS_NUMBER) {
        if (!js_tok_scaled(&k->js, 0, &k->base_ns))
          return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                           "\"baseTimeNanoseconds\" does not fit in 64 bits");
        k->has_base = 1;
      }
      if (js_skip_rest(&k->js, v)) return js_error(k);
    }
    if (rc) return rc;
  }
  if (js_next(&k->js) != JS_EOF) return js_error(k);
  if (!saw_events)
    return set_error(k, STEPSCOPE_E_FORMAT, 0, "no \"traceEvents\" array: not a Kineto trace");
  return 0;
}

/* Imports from the read callback, or, when `doc` is not NULL, from the
 * whole document in memory (tokenized in place: doc must be writable).
 * opt->fast_off reads every event token by token (for tests and
 * measurements: the result must not change); opt->fast_trace says on
 * stderr how many events each import read which way. */
int ssa_kineto_import(js_read_fn read, void *ctx, void *doc, size_t doc_len, ssa_split *sp,
                      struct ksplit_out *res, const char *name, const ssa_import_options *opt,
                      ssa_rank *r, stepscope_error *err) {
  kimport *k = calloc(1, sizeof *k);
  if (!k) return STEPSCOPE_E_NOMEM;
  k->r = r;
  k->name = name;
  k->err = err;
  k->first_ts = INT64_MAX;
  k->split = sp;
  k->split_res = res;
  k->fast = !opt->fast_off;
  k->ev.keep_inputs = opt->op_inputs;
  k->ev.keep_modules = opt->op_modules;
  k->ev.keep_memory = opt->op_memory;
  k->ev.keep_names = opt->thread_names;
  int rc = STEPSCOPE_E_NOMEM;
  if (sp ? js_init_buffer_grow(&k->js, ssa_split_doc(sp), ssa_split_cap(sp), 0, ssa_split_grow, sp)
      : doc ? js_init_buffer(&k->js, doc, doc_len)
            : js_init(&k->js, read, ctx))
    goto out;
  k->dom_user = ssa_rank_intern(r, "user_annotation");
  k->dom_cpu = ssa_rank_intern(r, "cpu_op");
  k->dom_gpu = ssa_rank_intern(r, "gpu_user_annotation");
  /* only when modules are kept: a string more would renumber the others, whose ids order
   * ranges that tie in time */
  k->dom_python = opt->op_modules ? ssa_rank_intern(r, "python_function") : 0;
  if (!k->dom_user || !k->dom_cpu || !k->dom_gpu || (opt->op_modules && !k->dom_python)) goto out;
  rc = read_document(k);
  if (opt->fast_trace)
    fprintf(stderr, "kineto fast: %s: %llu events read whole, %llu token by token\n", name,
            (unsigned long long)k->events_whole, (unsigned long long)k->events_by_token);
  if (rc == 0) rc = ssa_kineto_finish_rank(k);
  if (rc == STEPSCOPE_E_NOMEM && err && !err->message[0])
    snprintf(err->message, sizeof err->message, "%s: out of memory while importing", name);
out:
  js_free(&k->js);
  for (size_t i = 0; i < k->ngroups; i++)
    free(k->groups[i].ranks);
  free(k->groups);
  for (size_t i = 0; i < k->nparams; i++)
    free(k->params[i].pg_ranks);
  free(k->params);
  free(k->bares);
  free(k->thread_names);
  for (int d = 0; d < KDEVICES; d++)
    free(k->device_names[d]);
  free(k);
  return rc;
}
