/*
 * kineto_import.h — what the files of the Kineto importer share (internal to
 * analyzer/src/import/kineto; the folder's public header is kineto_source.h).
 *
 * One import is one `kimport`: the tokenizer, the event being read, and what
 * the mapping keeps until the whole file is read. Four files work on it,
 * in the way Perfetto splits its JSON tokenizer from its parser:
 *
 *   kineto_reader.c  the event reader: the token stream (and the fast path,
 *                    kineto_fast.c) into one `kevent` at a time, the
 *                    document's other top-level keys, one import driven
 *                    from start to finish (ssa_kineto_import)
 *   kineto_mapper.c  the mapper: what each kevent becomes in the rank model
 *                    (ssa_kineto_convert), and what is fixed once the whole
 *                    file is read (ssa_kineto_finish_rank); its collectives
 *                    are kineto_collectives.c's (their records, groups and
 *                    sequence numbers, NCCL metadata joined from
 *                    record_param_comms ops)
 *   kineto_split.c   the split import's helper thread, and the worker side:
 *                    events stored by the helper, converted by the caller
 *                    (ssa_kineto_split_store, ssa_kineto_split_handoff)
 *   kineto_source.c  the file source: plain, gzip (whole, pipe, stream) or
 *                    memory input, and the entry points of kineto_source.h
 */
#ifndef KINETO_IMPORT_H
#define KINETO_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "json_stream.h"
#include "kineto_event.h"
#include "kineto_host.h"
#include "kineto_split.h"
#include "skip_template.h"
#include "ssa_import.h"
#include "ssa_model.h"

#define KDEVICES   64
#define NAME_CACHE 1024 /* sets of kimport.name_cache, two names each (a power of two) */

/* A process group seen on this rank. */
typedef struct kgroup {
  uint64_t comm_id;
  int *ranks; /* parsed member list (may be empty) */
  size_t nranks;
  uint64_t with_seq, without_seq;
} kgroup;

/* NCCL metadata seen on a `record_param_comms` CPU op (older PyTorch puts it
 * only there, not on the kernel), kept until the whole file is read. */
typedef struct kparam {
  int64_t start, end;
  uint64_t tid, ext_id;
  int has_ext_id;
  char coll_name[KSHORT], dtype[KSHORT], pg_name[KSHORT], pg_desc[KSHORT];
  char *pg_ranks; /* normalised "0,1,2,3" (owned) */
  int has_in, has_out, has_group_size, has_seq;
  uint64_t in_nelems, out_nelems, group_size, seq;
  int has_rank_arg; /* args "Rank": of a send or recv, the peer's rank in the group */
  uint64_t rank_arg;
} kparam;

/* An NCCL kernel (by name) that carried no metadata of its own. */
typedef struct kbare {
  int64_t start, end;
  uint64_t corr, ext_id, stream, device;
  int has_corr, has_ext_id;
  uint32_t op; /* from the kernel's name (STEPSCOPE_COLL_*) */
} kbare;

/* A host thread's name from its "thread_name" metadata events (NAME of "thread TID (NAME)"). */
typedef struct kthread_name {
  uint64_t tid;
  char name[KSHORT];
} kthread_name;

typedef struct kimport {
  js_stream js;
  ssa_rank *r;
  const char *name; /* file name for messages */
  stepscope_error *err;
  kevent ev;
  int rank, world;
  int has_rank;
  /* distributedInfo.pg_config: this rank's pipeline and data-parallel groups (kineto_reader.c,
   * read_groups): their members' global ranks, by group rank; n = 0 when none is named */
  int pp_ranks[KGROUP_RANKS], dp_ranks[KGROUP_RANKS];
  int npp_ranks, ndp_ranks;
  int has_base;
  int64_t base_ns;
  char *device_names[KDEVICES];
  uint64_t device_use[KDEVICES];
  int64_t first_ts;
  kgroup *groups;
  size_t ngroups, groups_cap;
  kparam *params;
  size_t nparams, params_cap;
  kbare *bares;
  size_t nbares, bares_cap;
  uint64_t events, ignored, bad_times, truncated_names;
  uint64_t events_whole, events_by_token; /* how each event object was read */
  uint64_t negative_ts;                   /* events with ts < 0: left out */
  ssa_kineto_unimported unimported;       /* categories of complete events not imported */
  char host_name[KSHORT];                 /* top-level or distributedInfo host_name */
  uint32_t dom_user, dom_cpu, dom_gpu, dom_python, id_none;
  uint32_t name_cache[NAME_CACHE][2]; /* recent event names: string id by a cheap key */
  /* one document on two threads (kineto_split.h) */
  struct ksplit_out *store;       /* the helper's import: events stored here, not converted */
  ssa_split *split;               /* the caller's import: the helper */
  int fast;                       /* events read whole when they can be (kineto_fast.c) */
  const unsigned char *fast_next; /* the end of the event just read whole, or NULL */
  ssa_skip_templates templates; /* the fast path's: the rests of skipped events (skip_template.h) */
  struct ksplit_out *split_res; /* the caller's import: what the helper stored */
  kthread_name *thread_names;   /* from "thread_name" metadata events (keep_names): one a tid */
  size_t nthread_names, thread_names_cap;
} kimport;

static inline void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

/* What a name says by the words in it (a copy kind "HtoD", a collective "allreduce"): the kind
 * of the first entry of the table whose text the name holds, else `none`. */
typedef struct kname_part {
  const char *part;
  uint32_t kind;
} kname_part;

static inline uint32_t kind_by_name_part(const char *name, const kname_part *table, size_t n,
                                         uint32_t none) {
  for (size_t i = 0; i < n; i++)
    if (strstr(name, table[i].part)) return table[i].kind;
  return none;
}

/* Whether ssa_kineto_convert only counts the event (k->events, k->ignored):
 * not a complete one (a thread_name event kept by keep_names excepted), or a complete one of the
 * host's Python functions (not imported, and not listed among the unimported categories:
 * ssa_kineto_unimported_add). Keep in step with ssa_kineto_convert. */
static inline int only_counted(const kevent *ev) {
  return ((ev->ph[0] != 'X' || ev->ph[1]) && !thread_name_event(ev, ev->name, ev->name_len)) ||
         (is_python_function(ev) && !module_event(ev));
}

/* ---- the reader (kineto_reader.c) ---- */

/* Imports one document into r: from the read callback, or, when `doc` is
 * not NULL, from the whole document in memory (tokenized in place: doc must
 * be writable), or, when `sp` is not NULL, from the split's buffer with the
 * helper's events in `res` (kineto_split.h). `name` is the file's name for
 * messages; `opt` (not NULL): the fast path on or off, and whether to say
 * on stderr how many events it read (ssa_import.h). 0 or a status, with a
 * message in err. */
int ssa_kineto_import(js_read_fn read, void *ctx, void *doc, size_t doc_len, ssa_split *sp,
                      struct ksplit_out *res, const char *name, const ssa_import_options *opt,
                      ssa_rank *r, stepscope_error *err);

/* The next element of the events array: an event is read into k->ev (whole
 * over the buffer by kineto_fast.c when it can be, else token by token) and
 * converted, or stored on the split helper's thread; anything else is
 * skipped. *t says what came: JS_BEGIN_OBJECT (an event), JS_END_ARRAY (the
 * array's ']', its offset in tok_offset), another value, or JS_ERROR.
 * Returns 0 or an error code. */
int ssa_kineto_next_element(kimport *k, js_kind *t);

/* ---- the mapper (kineto_mapper.c) ---- */

/* k->ev into records of the rank (or only counted). 0 or a status. */
int ssa_kineto_convert(kimport *k);

/* Once the whole file is read: the header, the clock anchor, the layout,
 * the collectives' groups and sequence numbers, and the warnings. */
int ssa_kineto_finish_rank(kimport *k);

/* ---- the collectives (kineto_collectives.c) ---- */

/* The collective of the NCCL kernel k->ev (its metadata on it, or copied there from an op)
 * from s to e, with extra_flags (STEPSCOPE_COLL_F_*). 0 or a status. */
int ssa_kineto_emit_collective(kimport *k, int64_t s, int64_t e, uint32_t extra_flags);

/* A record_param_comms CPU op's NCCL metadata (k->ev, from s to e), kept for
 * ssa_kineto_finish_collectives. 0 or STEPSCOPE_E_NOMEM. */
int ssa_kineto_keep_param_comms(kimport *k, int64_t s, int64_t e);

/* An NCCL kernel (k->ev, by name) without metadata of its own, kept for
 * ssa_kineto_finish_collectives. 0 or STEPSCOPE_E_NOMEM. */
int ssa_kineto_keep_bare_nccl_kernel(kimport *k, int64_t s, int64_t e, uint64_t stream,
                                     uint64_t device);

/* Once the whole file is read and the rank known: the kept NCCL kernels joined to their ops'
 * metadata (else inferred from their stream), then every collective's sequence number and
 * comm rank, and the links by a correlation that several kernels share dropped. */
int ssa_kineto_finish_collectives(kimport *k);

/* ---- the split import's worker side (kineto_split.c) ---- */

/* On the helper's thread: k->ev stored in k->store instead of converted. */
int ssa_kineto_split_store(kimport *k);

/* After an event, with the caller's view ending at the split point: when
 * only a ',' and blanks lie before it inside the events array, the helper's
 * events are converted here and the tokenizer goes on at their ']'. */
int ssa_kineto_split_handoff(kimport *k);

/* Imports the file on `fd` (plain, or gzip with `size` bytes of text per its
 * trailer) through the split (`opt`: the point, the fast path, the trace):
 * 1 and the import's status in *rc_out, or 0
 * when the helper cannot be had (read the file another way). */
int ssa_kineto_import_split(int fd, int gzip, size_t size, const char *path,
                            const ssa_import_options *opt, ssa_rank *r, stepscope_error *err,
                            int *rc_out);

#endif
