/*
 * trace_summary.c — see trace_summary.h. A pool of threads takes files by an
 * atomic index; each file is streamed once with the library reader.
 */
#include "trace_summary.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kineto_source.h"
#include "ssa_model.h"

typedef struct scan_job {
  const char *const *paths;
  const unsigned char *kineto;
  size_t n;
  const ssa_import_options *import;
  trace_summary *out;
  atomic_size_t next;
  atomic_size_t done;
} scan_job;

static char *dup_or_empty(const char *s) {
  return strdup(s ? s : "");
}

static uint64_t record_start(const stepscope_record *r, uint64_t *end) {
  switch (r->kind) {
  case STEPSCOPE_REC_KERNEL: *end = r->u.kernel.end_ns; return r->u.kernel.start_ns;
  case STEPSCOPE_REC_MEMCPY: *end = r->u.memcpy.end_ns; return r->u.memcpy.start_ns;
  case STEPSCOPE_REC_MEMSET: *end = r->u.memset.end_ns; return r->u.memset.start_ns;
  case STEPSCOPE_REC_SYNC: *end = r->u.sync.end_ns; return r->u.sync.start_ns;
  case STEPSCOPE_REC_API: *end = r->u.api.end_ns; return r->u.api.start_ns;
  case STEPSCOPE_REC_RANGE: *end = r->u.range.end_ns; return r->u.range.start_ns;
  case STEPSCOPE_REC_MARK: *end = r->u.mark.time_ns; return r->u.mark.time_ns;
  case STEPSCOPE_REC_COLLECTIVE: *end = r->u.collective.end_ns; return r->u.collective.start_ns;
  case STEPSCOPE_REC_HOST_OP: *end = r->u.host_op.end_ns; return r->u.host_op.start_ns;
  case STEPSCOPE_REC_COUNTER: *end = r->u.counter.time_ns; return r->u.counter.time_ns;
  case STEPSCOPE_REC_MEMORY: *end = r->u.memory.time_ns; return r->u.memory.time_ns;
  case STEPSCOPE_REC_OVERHEAD: *end = r->u.overhead.end_ns; return r->u.overhead.start_ns;
  default: *end = 0; return UINT64_MAX;
  }
}

static void add_metadata_key(trace_summary *s, const char *key) {
  for (size_t i = 0; i < s->nmetadata; i++)
    if (!strcmp(s->metadata_keys[i], key)) return;
  char **n = realloc(s->metadata_keys, (s->nmetadata + 1) * sizeof *n);
  if (!n) return;
  s->metadata_keys = n;
  if ((n[s->nmetadata] = strdup(key))) s->nmetadata++;
}

static void span_add(trace_summary *s, int64_t start, int64_t end) {
  if (start < 0) return;
  if ((uint64_t)start < s->first_ns) s->first_ns = (uint64_t)start;
  if (end > start && (uint64_t)end > s->last_ns) s->last_ns = (uint64_t)end;
  if ((uint64_t)start > s->last_ns) s->last_ns = (uint64_t)start;
}

/* A PyTorch (Kineto) trace: imported into the analyzer's model, which is
 * then counted in the terms of our record kinds. */
static void scan_kineto(const char *path, const ssa_import_options *import, trace_summary *s) {
  ssa_rank r;
  if (ssa_rank_init(&r) != 0) {
    s->error.code = STEPSCOPE_E_NOMEM;
    snprintf(s->error.message, sizeof s->error.message, "%s: out of memory", path);
    return;
  }
  if (ssa_kineto_source_load_opts(path, import, &r, &s->error) != 0) {
    if (!s->error.code) s->error.code = STEPSCOPE_E_FORMAT;
    ssa_rank_free(&r);
    return;
  }
  s->ok = 1;
  s->header.format_major = 0; /* not our format: shown as the producer */
  s->header.rank = r.rank;
  s->header.world_size = r.world_size;
  s->header.local_rank = r.local_rank;
  s->header.pid = r.pid;
  s->header.hostname = dup_or_empty(r.hostname);
  s->header.producer =
      dup_or_empty(r.producer && r.producer[0] ? r.producer : "PyTorch profiler (Kineto JSON)");
  s->header.device_name = dup_or_empty(r.device_name);
  s->header.device_json = dup_or_empty(NULL);
  s->header.driver_version = dup_or_empty(NULL);
  s->header.cuda_version = dup_or_empty(NULL);
  s->header.nccl_version = dup_or_empty(NULL);
  s->header.cupti_version = dup_or_empty(NULL);
  s->header.config_json = dup_or_empty(r.config_json);
  for (size_t i = 0; i < r.nops; i++) {
    static const uint32_t kind_of[] = {0, STEPSCOPE_REC_KERNEL, STEPSCOPE_REC_MEMCPY,
                                       STEPSCOPE_REC_MEMSET, STEPSCOPE_REC_HOST_OP};
    if (r.ops[i].kind < sizeof kind_of / sizeof kind_of[0]) s->counts[kind_of[r.ops[i].kind]]++;
    span_add(s, r.ops[i].start, r.ops[i].end);
  }
  for (size_t i = 0; i < r.napis; i++)
    span_add(s, r.apis[i].start, r.apis[i].end);
  for (size_t i = 0; i < r.nranges; i++)
    span_add(s, r.ranges[i].start, r.ranges[i].end);
  s->counts[STEPSCOPE_REC_API] = r.napis;
  s->counts[STEPSCOPE_REC_RANGE] = r.nranges;
  s->counts[STEPSCOPE_REC_COLLECTIVE] = r.ncolls;
  s->counts[STEPSCOPE_REC_SYNC] = r.nsyncs;
  s->counts[STEPSCOPE_REC_COUNTER] = r.ncounters;
  s->counts[STEPSCOPE_REC_CLOCK_ANCHOR] = r.nanchors;
  s->counts[STEPSCOPE_REC_METADATA] = r.nmeta;
  s->counts[STEPSCOPE_REC_MARK] = r.marks;
  s->counts[STEPSCOPE_REC_MEMORY] = r.memory_events;
  s->counts[STEPSCOPE_REC_OVERHEAD] = r.overheads;
  s->records = r.records;
  for (size_t i = 0; i < sizeof r.dropped / sizeof r.dropped[0]; i++)
    s->dropped += r.dropped[i];
  for (size_t i = 0; i < r.nmeta; i++)
    add_metadata_key(s, r.meta[i].key);
  s->warnings = r.nwarnings ? calloc(r.nwarnings, sizeof *s->warnings) : NULL;
  for (size_t i = 0; s->warnings && i < r.nwarnings; i++)
    if ((s->warnings[s->nwarnings] = strdup(r.warnings[i]))) s->nwarnings++;
  struct stat st;
  if (stat(path, &st) == 0) s->file_bytes = (uint64_t)st.st_size;
  ssa_rank_free(&r);
}

static void scan_one(const char *path, int kineto, const ssa_import_options *import,
                     trace_summary *s) {
  memset(s, 0, sizeof *s);
  if (kineto) {
    s->path = path;
    s->first_ns = UINT64_MAX;
    scan_kineto(path, import, s);
    return;
  }
  s->path = path;
  s->first_ns = UINT64_MAX;
  stepscope_reader_options ropt = {import->inflate};
  stepscope_reader *r = stepscope_reader_open_opts(path, &ropt, &s->error);
  if (!r) return;
  s->ok = 1;
  const stepscope_header *h = stepscope_reader_header(r);
  s->header = *h;
  s->header.hostname = dup_or_empty(h->hostname);
  s->header.producer = dup_or_empty(h->producer);
  s->header.device_name = dup_or_empty(h->device_name);
  s->header.device_json = dup_or_empty(h->device_json);
  s->header.driver_version = dup_or_empty(h->driver_version);
  s->header.cuda_version = dup_or_empty(h->cuda_version);
  s->header.nccl_version = dup_or_empty(h->nccl_version);
  s->header.cupti_version = dup_or_empty(h->cupti_version);
  s->header.config_json = dup_or_empty(h->config_json);
  s->file_bytes = stepscope_reader_file_size(r);
  stepscope_record rec;
  int rc;
  while ((rc = stepscope_reader_next(r, &rec, &s->error)) == 1) {
    if (rec.kind == STEPSCOPE_REC_HEADER) continue;
    if (rec.kind < STEPSCOPE_REC_KIND_MAX) s->counts[rec.kind]++;
    s->records++;
    if (rec.kind == STEPSCOPE_REC_DROPPED) s->dropped += rec.u.dropped.count;
    if (rec.kind == STEPSCOPE_REC_METADATA) add_metadata_key(s, rec.u.metadata.key);
    uint64_t end, start = record_start(&rec, &end);
    if (start != UINT64_MAX) {
      if (start < s->first_ns) s->first_ns = start;
      if (end > s->last_ns) s->last_ns = end;
      if (start > s->last_ns) s->last_ns = start;
    }
  }
  if (rc == 0) s->error.code = 0;
  s->unknown = stepscope_reader_unknown_records(r);
  s->damaged_regions = stepscope_reader_damaged_regions(r);
  s->damaged_bytes = stepscope_reader_damaged_bytes(r);
  s->close_state = stepscope_reader_close_state(r, &s->close_signal);
  size_t nw = stepscope_reader_warning_count(r);
  s->warnings = nw ? calloc(nw, sizeof *s->warnings) : NULL;
  for (size_t i = 0; s->warnings && i < nw; i++)
    if ((s->warnings[s->nwarnings] = strdup(stepscope_reader_warning(r, i)))) s->nwarnings++;
  stepscope_reader_close(r);
}

static void *scan_worker(void *arg) {
  scan_job *job = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&job->next, 1);
    if (i >= job->n) break;
    scan_one(job->paths[i], job->kineto && job->kineto[i], job->import, &job->out[i]);
    atomic_fetch_add(&job->done, 1);
  }
  return NULL;
}

void trace_summary_scan(const char *const *paths, const unsigned char *kineto, size_t n,
                        unsigned threads, const ssa_import_options *import, trace_summary *out) {
  scan_job job = {.paths = paths, .kineto = kineto, .n = n, .import = import, .out = out};
  atomic_init(&job.next, 0);
  atomic_init(&job.done, 0);
  if (threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    threads = c > 0 ? (unsigned)c : 1;
  }
  if (threads > n) threads = (unsigned)n;
  if (threads <= 1) {
    scan_worker(&job);
    return;
  }
  pthread_t *tids = calloc(threads, sizeof *tids);
  unsigned started = 0;
  for (unsigned t = 0; tids && t < threads; t++)
    if (pthread_create(&tids[t], NULL, scan_worker, &job) == 0) started++;
  int tty = isatty(2);
  while (tty && atomic_load(&job.done) < n && started) {
    fprintf(stderr, "\rreading traces: %zu/%zu files", atomic_load(&job.done), n);
    usleep(100000);
  }
  if (!started) scan_worker(&job); /* no threads could start: do it here */
  for (unsigned t = 0; t < started; t++)
    pthread_join(tids[t], NULL);
  if (tty && started) fprintf(stderr, "\r%60s\r", "");
  free(tids);
}

void trace_summary_free(trace_summary *s) {
  if (s->ok) {
    free((char *)s->header.hostname);
    free((char *)s->header.producer);
    free((char *)s->header.device_name);
    free((char *)s->header.device_json);
    free((char *)s->header.driver_version);
    free((char *)s->header.cuda_version);
    free((char *)s->header.nccl_version);
    free((char *)s->header.cupti_version);
    free((char *)s->header.config_json);
  }
  ssa_text_list_free(s->warnings, s->nwarnings);
  for (size_t i = 0; i < s->nmetadata; i++)
    free(s->metadata_keys[i]);
  free(s->metadata_keys);
}
