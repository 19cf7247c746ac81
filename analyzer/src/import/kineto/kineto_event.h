/*
 * kineto_event.h — one Kineto trace event as the importer keeps it (only the
 * fields and args the mapping uses), and the small decisions both of its
 * readers make on it: which key is which, which category, which parts of an
 * event can be skipped unread. The readers are kineto_reader.c (token by
 * token, every case and every message) and kineto_fast.c (whole events over
 * the buffer, the common case); they must fill a kevent identically, which
 * is why these decisions live here once.
 */
#ifndef KINETO_EVENT_H
#define KINETO_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sc_hash.h"

#define KNAME_MAX    4096 /* event names longer than this are cut */
#define KSHORT       128
#define KGROUP_RANKS 256  /* members of a process group kept from pg_config, at most */
#define KRANKS_MAX   8192 /* process group member list text kept for hashing */
#define KCAT_TEXT    48   /* an unimported category's name, cut to fit */
#define KINPUTS      8192 /* a CPU op's input args (compact JSON) kept for `stepscope ops` */

enum kcat {
  KC_OTHER = 0,
  KC_KERNEL,
  KC_MEMCPY,
  KC_MEMSET,
  KC_RUNTIME,
  KC_DRIVER,
  KC_USER_ANNOTATION,
  KC_GPU_USER_ANNOTATION,
  KC_CPU_OP,
  KC_CUDA_SYNC
};

/* One event, with only the fields the mapping needs. */
typedef struct kevent {
  char ph[4];
  int cat;
  char cat_text[KCAT_TEXT]; /* the category's text when it is not imported */
  char name[KNAME_MAX];
  size_t name_len;
  int has_ts, has_dur;
  int64_t ts, dur; /* ns */
  uint64_t pid, tid;
  char tid_name[KSHORT]; /* a string tid ("PyTorch Profiler"): its text, cut to fit; "" else */
  char arg_name[KSHORT]; /* args "name": a thread_name metadata event's name, cut to fit */
  int has_corr, has_stream, has_device, has_bytes, has_ext_id;
  uint64_t corr, stream, device, bytes, ext_id;
  /* a cuda_sync event's awaited stream and cudaEventRecord correlation (-1 in the file: none) */
  int has_wait_stream, has_wait_corr;
  uint64_t wait_stream, wait_corr;
  /* args "Rank": a record_param_comms op's rank in its group; of a send or recv, the peer's
   * (PyTorch's ProcessGroupNCCL records the destination or source there) */
  int has_rank_arg;
  uint64_t rank_arg;
  uint32_t grid[3], block[3];
  /* NCCL metadata */
  char coll_name[KSHORT], dtype[KSHORT], pg_name[KSHORT], pg_desc[KSHORT];
  char pg_ranks[KRANKS_MAX]; /* normalised "0,1,2,3" */
  int has_in, has_out, has_group_size, has_seq;
  uint64_t in_nelems, out_nelems, group_size, seq;
  /* A CPU op's inputs ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"), only
   * when the import keeps them (keep_inputs: set once per import, for `stepscope ops`): their
   * members as compact JSON ("{" then `"key":value` joined by ","; the mapper closes it),
   * inputs_len bytes; inputs_cut when they did not fit or held an object (then not kept). */
  int keep_inputs, inputs_cut;
  int keep_modules; /* python_function events "nn.Module: NAME" are imported (`stepscope ops
                       --by module`: with_modules); set once per import like keep_inputs */
  int keep_names;   /* "thread_name" metadata events ("M") are read, not skipped after `ph`
                       (`stepscope export`: the lanes' labels); set once per import */
  int keep_memory;  /* "[memory]" instant events are imported (`stepscope ops --memory`); read
                       token by token only (the fast path gives up on instant events then) */
  int has_mem;      /* a "[memory]" event's args: allocated and reserved after it, bytes
                       (negative: freed), address, device type and id */
  int64_t mem_allocated, mem_reserved, mem_bytes, mem_device_type, mem_device_id;
  uint64_t mem_addr;
  size_t inputs_len;
  char inputs[KINPUTS];
} kevent;

/* An empty event: what a reader starts from. */
static inline void kevent_clear(kevent *ev) {
  ev->ph[0] = 0;
  ev->cat = KC_OTHER;
  ev->cat_text[0] = 0;
  ev->name[0] = 0;
  ev->name_len = 0;
  ev->has_ts = ev->has_dur = 0;
  ev->pid = ev->tid = 0;
  ev->tid_name[0] = 0;
  ev->arg_name[0] = 0;
  ev->has_corr = ev->has_stream = ev->has_device = ev->has_bytes = ev->has_ext_id = 0;
  ev->corr = ev->stream = ev->device = ev->bytes = ev->ext_id = 0;
  ev->has_wait_stream = ev->has_wait_corr = 0;
  ev->wait_stream = ev->wait_corr = 0;
  ev->has_rank_arg = 0;
  ev->rank_arg = 0;
  memset(ev->grid, 0, sizeof ev->grid);
  memset(ev->block, 0, sizeof ev->block);
  ev->coll_name[0] = ev->dtype[0] = ev->pg_name[0] = ev->pg_desc[0] = ev->pg_ranks[0] = 0;
  ev->has_in = ev->has_out = ev->has_group_size = ev->has_seq = 0;
  ev->in_nelems = ev->out_nelems = ev->group_size = ev->seq = 0;
  ev->inputs_cut = 0;
  ev->inputs_len = 0;
  ev->has_mem = 0;
  ev->mem_allocated = ev->mem_reserved = ev->mem_bytes = ev->mem_device_type = 0;
  ev->mem_device_id = -1;
  ev->mem_addr = 0;
}

/* A "[memory]" instant event (profile_memory=True), imported when the import keeps memory. */
static inline int memory_event(const kevent *ev) {
  return ev->keep_memory && ev->ph[0] == 'i' && !ev->ph[1] && !strcmp(ev->name, "[memory]");
}

/* Appends n bytes to a CPU op's inputs text; 0, or -1 (inputs_cut set) when they do not fit
 * (one byte is kept for the mapper's closing brace). */
static inline int kevent_inputs_put(kevent *ev, const char *s, size_t n) {
  if (ev->inputs_cut || ev->inputs_len + n + 2 > sizeof ev->inputs) {
    ev->inputs_cut = 1;
    return -1;
  }
  memcpy(ev->inputs + ev->inputs_len, s, n);
  ev->inputs_len += n;
  return 0;
}

/* The start of one input member: "{" or "," then the quoted key (plain ASCII, from args_key). */
static inline void kevent_inputs_key(kevent *ev, const char *key, size_t n) {
  kevent_inputs_put(ev, ev->inputs_len ? "," : "{", 1);
  kevent_inputs_put(ev, "\"", 1);
  kevent_inputs_put(ev, key, n);
  kevent_inputs_put(ev, "\":", 2);
}

/* Whether an event's input args are read: a CPU op's, when the import keeps them. */
static inline int inputs_wanted(const kevent *ev) {
  return ev->keep_inputs && ev->cat == KC_CPU_OP;
}
/* Appends the integers of a member list (a JSON array's numbers one by
 * one, or a string such as "[0, 1, 2, 3]": n bytes of text) to
 * ev->pg_ranks as "0,1,2,3". */
static inline void kevent_ranks_append(kevent *ev, const char *text, size_t len) {
  size_t n = strlen(ev->pg_ranks);
  for (const char *p = text, *e = text + len; p < e;) {
    if (*p >= '0' && *p <= '9') {
      const char *s = p;
      while (p < e && *p >= '0' && *p <= '9')
        p++;
      size_t digits = (size_t)(p - s);
      if (n + digits + 2 >= sizeof ev->pg_ranks) return;
      if (n) ev->pg_ranks[n++] = ',';
      memcpy(ev->pg_ranks + n, s, digits);
      n += digits;
      ev->pg_ranks[n] = 0;
    } else {
      p++;
    }
  }
}

/* The event category from its text (s, n bytes). */
static inline int cat_of(const char *s, size_t n) {
#define IS(lit) (n == sizeof lit - 1 && !memcmp(s, lit, sizeof lit - 1))
  if (IS("kernel") || IS("Kernel")) return KC_KERNEL;
  if (IS("cpu_op") || IS("Operator")) return KC_CPU_OP;
  if (IS("cuda_runtime") || IS("Runtime")) return KC_RUNTIME;
  if (IS("gpu_memcpy") || IS("Memcpy")) return KC_MEMCPY;
  if (IS("gpu_memset") || IS("Memset")) return KC_MEMSET;
  if (IS("cuda_driver")) return KC_DRIVER;
  if (IS("user_annotation")) return KC_USER_ANNOTATION;
  if (IS("gpu_user_annotation")) return KC_GPU_USER_ANNOTATION;
  if (IS("cuda_sync")) return KC_CUDA_SYNC;
#undef IS
  return KC_OTHER;
}

/* Copies the current token (n bytes) into dst (cap bytes), cut to fit. */
static inline void copy_tok(char *dst, size_t cap, const char *tok, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, tok, n);
  dst[n] = 0;
}

/* The event keys the mapping uses. */
enum ekey { E_NONE = 0, E_PH, E_CAT, E_NAME, E_TS, E_DUR, E_PID, E_TID, E_ARGS };

static inline int event_key(const char *s, size_t n) {
  switch (n) {
  case 2:
    if (s[0] == 'p' && s[1] == 'h') return E_PH;
    if (s[0] == 't' && s[1] == 's') return E_TS;
    break;
  case 3:
    if (!memcmp(s, "cat", 3)) return E_CAT;
    if (!memcmp(s, "dur", 3)) return E_DUR;
    if (!memcmp(s, "pid", 3)) return E_PID;
    if (!memcmp(s, "tid", 3)) return E_TID;
    break;
  case 4:
    if (!memcmp(s, "name", 4)) return E_NAME;
    if (!memcmp(s, "args", 4)) return E_ARGS;
    break;
  default: break;
  }
  return E_NONE;
}

/* The args keys the mapping uses. */
enum akey {
  A_NONE = 0,
  A_CORRELATION,
  A_STREAM,
  A_DEVICE,
  A_BYTES,
  A_GRID,
  A_BLOCK,
  A_COLL_NAME,
  A_DTYPE,
  A_PG_NAME,
  A_PG_DESC,
  A_PG_RANKS,
  A_IN_NELEMS,
  A_OUT_NELEMS,
  A_GROUP_SIZE,
  A_SEQ,
  A_EXTERNAL_ID,
  A_INPUT_DIMS,
  A_INPUT_TYPE,
  A_INPUT_STRIDES,
  A_CONCRETE_INPUTS,
  A_NAME,
  A_WAIT_STREAM,
  A_WAIT_CORR,
  A_RANK
};

/* By length first, then the bytes: each comparison has a constant size,
 * which compilers turn into a few word compares. */
static inline int args_key(const char *s, size_t n) {
#define IS(lit) (!memcmp(s, lit, sizeof lit - 1))
  switch (n) {
  case 3: return IS("Seq") || IS("seq") ? A_SEQ : A_NONE;
  case 4: return IS("grid") ? A_GRID : IS("name") ? A_NAME : IS("Rank") ? A_RANK : A_NONE;
  case 5: return IS("bytes") ? A_BYTES : IS("block") ? A_BLOCK : IS("dtype") ? A_DTYPE : A_NONE;
  case 6: return IS("stream") ? A_STREAM : IS("device") ? A_DEVICE : A_NONE;
  case 7: return IS("pg_name") ? A_PG_NAME : IS("pg_desc") ? A_PG_DESC : A_NONE;
  case 10:
    return IS("Group size")   ? A_GROUP_SIZE
           : IS("Input Dims") ? A_INPUT_DIMS
           : IS("Input type") ? A_INPUT_TYPE
                              : A_NONE;
  case 11: return IS("correlation") ? A_CORRELATION : IS("External id") ? A_EXTERNAL_ID : A_NONE;
  case 13:
    return IS("In msg nelems") ? A_IN_NELEMS : IS("Input Strides") ? A_INPUT_STRIDES : A_NONE;
  case 14:
    return IS("Out msg nelems") ? A_OUT_NELEMS : IS("wait_on_stream") ? A_WAIT_STREAM : A_NONE;
  case 15:
    return IS("Collective name") ? A_COLL_NAME : IS("Concrete Inputs") ? A_CONCRETE_INPUTS : A_NONE;
  case 18: return IS("Process Group Name") ? A_PG_NAME : A_NONE;
  case 19: return IS("Process Group Ranks") ? A_PG_RANKS : A_NONE;
  case 25: return IS("Process Group Description") ? A_PG_DESC : A_NONE;
  case 33: return IS("wait_on_cuda_event_record_corr_id") ? A_WAIT_CORR : A_NONE;
  default: return A_NONE;
  }
#undef IS
}

/* Where each args key goes, and as what: a number (KA_U64: a uint64_t field
 * of kevent and its has_ flag), a short string (KA_TEXT: a KSHORT array), a
 * triple (KA_TRIPLE: grid, block), the member list (KA_RANKS) or a CPU op's input
 * (KA_INPUTS: its value as compact JSON in kevent.inputs, when inputs_wanted). Both
 * readers take the mapping from here; each keeps its own way of reading
 * the value (which JSON forms it takes). */
enum kafill { KA_SKIP = 0, KA_U64, KA_TEXT, KA_TRIPLE, KA_RANKS, KA_INPUTS };

typedef struct kafield {
  unsigned char fill;    /* enum kafill */
  unsigned short at;     /* offset of the field in kevent */
  unsigned short has_at; /* KA_U64: offset of its has_ flag */
} kafield;

#define KA_NUM(f, h)   KA_U64, offsetof(kevent, f), offsetof(kevent, h)
#define KA_AT(kind, f) kind, offsetof(kevent, f), 0

static const kafield kargs_field[] = {
    [A_NONE] = {KA_SKIP, 0, 0},
    [A_CORRELATION] = {KA_NUM(corr, has_corr)},
    [A_STREAM] = {KA_NUM(stream, has_stream)},
    [A_DEVICE] = {KA_NUM(device, has_device)},
    [A_BYTES] = {KA_NUM(bytes, has_bytes)},
    [A_GRID] = {KA_AT(KA_TRIPLE, grid)},
    [A_BLOCK] = {KA_AT(KA_TRIPLE, block)},
    [A_COLL_NAME] = {KA_AT(KA_TEXT, coll_name)},
    [A_DTYPE] = {KA_AT(KA_TEXT, dtype)},
    [A_PG_NAME] = {KA_AT(KA_TEXT, pg_name)},
    [A_PG_DESC] = {KA_AT(KA_TEXT, pg_desc)},
    [A_PG_RANKS] = {KA_AT(KA_RANKS, pg_ranks)},
    [A_IN_NELEMS] = {KA_NUM(in_nelems, has_in)},
    [A_OUT_NELEMS] = {KA_NUM(out_nelems, has_out)},
    [A_GROUP_SIZE] = {KA_NUM(group_size, has_group_size)},
    [A_SEQ] = {KA_NUM(seq, has_seq)},
    [A_EXTERNAL_ID] = {KA_NUM(ext_id, has_ext_id)},
    [A_INPUT_DIMS] = {KA_AT(KA_INPUTS, inputs)},
    [A_INPUT_TYPE] = {KA_AT(KA_INPUTS, inputs)},
    [A_INPUT_STRIDES] = {KA_AT(KA_INPUTS, inputs)},
    [A_CONCRETE_INPUTS] = {KA_AT(KA_INPUTS, inputs)},
    [A_NAME] = {KA_AT(KA_TEXT, arg_name)},
    [A_WAIT_STREAM] = {KA_NUM(wait_stream, has_wait_stream)},
    [A_WAIT_CORR] = {KA_NUM(wait_corr, has_wait_corr)},
    [A_RANK] = {KA_NUM(rank_arg, has_rank_arg)},
};
#undef KA_NUM
#undef KA_AT

_Static_assert(offsetof(kevent, inputs) <= 0xffff, "kafield offsets are 16-bit");
_Static_assert(sizeof kargs_field / sizeof kargs_field[0] == A_RANK + 1,
               "one kafield per args key");
_Static_assert(sizeof((kevent *)0)->coll_name == KSHORT && sizeof((kevent *)0)->dtype == KSHORT &&
                   sizeof((kevent *)0)->pg_name == KSHORT && sizeof((kevent *)0)->pg_desc == KSHORT,
               "KA_TEXT fields are KSHORT bytes");

/* A number read for a KA_U64 key. */
static inline void kevent_set_u64(kevent *ev, const kafield *f, uint64_t v) {
  *(uint64_t *)((char *)ev + f->at) = v;
  *(int *)((char *)ev + f->has_at) = 1;
}

/* The KSHORT bytes of a KA_TEXT key; the three numbers of a KA_TRIPLE one. */
static inline char *kevent_text(kevent *ev, const kafield *f) {
  return (char *)ev + f->at;
}

static inline uint32_t *kevent_triple(kevent *ev, const kafield *f) {
  return (uint32_t *)((char *)ev + f->at);
}

/* Whether the rest of an event, once its `ph` and `cat` are read, can be
 * skipped unread (checked, not stored): a complete event of a category that
 * is not imported, other than the profiling session's `Trace` span, is only
 * counted by ssa_kineto_convert (ph and the category's text). Most events of a
 * real trace are such (python_function: two thirds of them), and skipping
 * them saves converting their names, times and args. Kineto writes `ph` and
 * `cat` first and never repeats a key; in a document that repeats `cat`
 * after such a category, the repetition is not seen. */
static inline int is_python_function(const kevent *ev) {
  return ev->cat == KC_OTHER && !memcmp(ev->cat_text, "python_function", sizeof "python_function");
}

static inline int skip_unimported(const kevent *ev) {
  return ev->cat == KC_OTHER && ev->ph[0] && ev->cat_text[0] &&
         memcmp(ev->cat_text, "Trace", sizeof "Trace") != 0 &&
         !(ev->keep_modules && is_python_function(ev)) &&
         !(ev->keep_memory && ev->ph[0] == 'i' && !ev->ph[1]);
}

/* A python_function event that is a module's forward ("nn.Module: Linear_0", written by the
 * profiler's with_modules), imported when the import keeps modules. */
#define KMODULE_PREFIX "nn.Module: "
static inline int module_event(const kevent *ev) {
  return ev->keep_modules && is_python_function(ev) &&
         !strncmp(ev->name, KMODULE_PREFIX, sizeof KMODULE_PREFIX - 1);
}

/* Likewise once `ph` says the event is not a complete one ("X"): ssa_kineto_convert
 * only counts it. Metadata events ("M": process and thread names, sort
 * indices) are two thirds of some traces (hta mtia_trace_single_rank: 310
 * thousand of 456 thousand events, each with ts, pid, tid and an args
 * object after its `ph`); skipping their rest took that trace's import from
 * about 125 to 105 ms (perf stat -r 5, whole process,
 * alternating with the previous binary). The same caveat as
 * above: a repeated `ph` after such a value is not seen, and a malformed
 * `ts` after it is not an error (the rest is still checked as JSON). An instant event read
 * whole for its memory record (keep_memory) keeps that: a `ts` or `dur` after its `ph` that does
 * not fit leaves it without a time (kineto_reader.c), not an error. */
static inline int skip_not_complete(const kevent *ev) {
  return ev->ph[0] && (ev->ph[0] != 'X' || ev->ph[1]) &&
         !(ev->keep_memory && ev->ph[0] == 'i' && !ev->ph[1]);
}

/* A "thread_name" metadata event (its name the n bytes at `name`: Kineto writes it before
 * `ph`), read whole when the import keeps thread names (keep_names) and not skipped as
 * skip_not_complete says; its args "name" (arg_name) labels the thread's lane. One named
 * after its `ph` is skipped as before. */
static inline int thread_name_event(const kevent *ev, const char *name, size_t n) {
  return ev->keep_names && ev->ph[0] == 'M' && !ev->ph[1] && n == sizeof "thread_name" - 1 &&
         !memcmp(name, "thread_name", n);
}

/* What the readers skip once `ph` is known: skip_not_complete, less thread_name_event. */
static inline int skip_after_ph(const kevent *ev, const char *name, size_t n) {
  return skip_not_complete(ev) && !thread_name_event(ev, name, n);
}

/* Whether the event's args cannot matter, once its category and name are
 * known (Kineto writes both before the args): ssa_kineto_convert reads nothing
 * from the args of a CPU op or a host annotation except the NCCL metadata
 * of a `record_param_comms` op (the stream, device and correlation serve
 * GPU events, API calls and GPU annotations only). Such args (input shapes,
 * types, ids: most of a CPU op's text) are then skipped as one value
 * instead of member by member. When the name comes after the args, they are
 * read as before. A CPU op's args are read when the import keeps its inputs (inputs_wanted). */
static inline int args_unused(const kevent *ev) {
  return (ev->cat == KC_CPU_OP || ev->cat == KC_USER_ANNOTATION) && ev->name[0] &&
         !inputs_wanted(ev) && strcmp(ev->name, "record_param_comms") != 0;
}

/* The same with the name given as its n bytes (kineto_fast.c holds it in
 * the buffer until the event is read). */
static inline int args_unused_named(const kevent *ev, const char *name, size_t n) {
  int cat = ev->cat;
  return (cat == KC_CPU_OP || cat == KC_USER_ANNOTATION) && n > 0 && !inputs_wanted(ev) &&
         !(n == sizeof "record_param_comms" - 1 && !memcmp(name, "record_param_comms", n));
}

#endif
