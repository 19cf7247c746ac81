/*
 * gen.c — the generator's scenario builder and its writer: turns a
 * gen_run (true-time description) into one stepscope trace file per rank
 * through libstepscope's public writer, exactly as a producer would: stream
 * declarations, clock anchors, step ranges, launch calls with correlation
 * ids, kernels or CPU-backend host ops, COLLECTIVE records joined by
 * correlation (GPU) or by (comm_id, seq) (CPU), sync records and metadata.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stepscope.h"
#include "stepscope_gen.h"

#define RT_BASE 1700000000000000000ll

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need)
    n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

void gen_init(gen_run *g, int nranks) {
  memset(g, 0, sizeof *g);
  g->nranks = nranks;
  for (int r = 0; r < nranks; r++) {
    g->ranks[r].present = 1;
    g->ranks[r].stage = -1;
    g->ranks[r].nlanes = 1;
    g->ranks[r].lane_name[0] = "compute";
  }
}

void gen_free(gen_run *g) {
  free(g->ops);
  free(g->colls);
  free(g->steps);
  free(g->syncs);
  free(g->loads);
  free(g->ranges);
  memset(g, 0, sizeof *g);
}

int gen_add_op(gen_run *g, const gen_op *op) {
  if (grow((void **)&g->ops, &g->ops_cap, g->nops + 1, sizeof *g->ops)) return -1;
  g->ops[g->nops] = *op;
  g->ops[g->nops].coll = -1;
  return (int)g->nops++;
}

int gen_add_coll(gen_run *g, const gen_coll *c) {
  if (grow((void **)&g->colls, &g->colls_cap, g->ncolls + 1, sizeof *g->colls)) return -1;
  g->colls[g->ncolls] = *c;
  for (int m = 0; m < c->nmembers; m++) {
    gen_op *o = &g->ops[c->member_op[m]];
    o->coll = (int)g->ncolls;
    o->cls = GEN_COMM;
    o->pipeline = (c->flags & STEPSCOPE_COLL_F_PIPELINE) != 0;
  }
  return (int)g->ncolls++;
}

int gen_add_step(gen_run *g, int rank, int64_t number, int64_t s, int64_t e) {
  if (grow((void **)&g->steps, &g->steps_cap, g->nsteps + 1, sizeof *g->steps)) return -1;
  g->steps[g->nsteps++] = (gen_step){rank, number, s, e};
  return 0;
}

int gen_add_load(gen_run *g, int rank, int64_t s, int64_t e) {
  if (grow((void **)&g->loads, &g->loads_cap, g->nloads + 1, sizeof *g->loads)) return -1;
  g->loads[g->nloads++] = (gen_load){rank, s, e};
  return 0;
}

int gen_add_sync(gen_run *g, int rank, int lane, int64_t s, int64_t e) {
  if (grow((void **)&g->syncs, &g->syncs_cap, g->nsyncs + 1, sizeof *g->syncs)) return -1;
  g->syncs[g->nsyncs++] = (gen_sync){rank, lane, s, e};
  return 0;
}

int gen_add_range(gen_run *g, int rank, const char *name, int mb, int64_t s, int64_t e) {
  if (grow((void **)&g->ranges, &g->ranges_cap, g->nranges + 1, sizeof *g->ranges)) return -1;
  g->ranges[g->nranges++] = (gen_range){rank, name, mb, s, e};
  return 0;
}

static uint64_t stream_id(int lane) {
  return 7 + (uint64_t)lane;
}

static int write_rank(const gen_run *g, int r, const char *dir, char *errbuf, size_t errlen) {
  const gen_rank *gr = &g->ranks[r];
  char path[4096], host[64];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, r);
  snprintf(host, sizeof host, "gen-host-%d", r / 2);
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = r;
  h.world_size = g->nranks;
  h.local_rank = r % 2;
  h.pid = 1000 + r;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.start_ns = (uint64_t)gr->clock_offset;
  h.hostname = host;
  h.producer = "stepscope-gen";
  h.device_name = gr->cpu_backend ? "cpu" : "Generated GPU";
  h.config_json = g->config_json ? g->config_json : "{\"generator\":true}";
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) {
    snprintf(errbuf, errlen, "%s", err.message);
    return -1;
  }
  uint64_t off = (uint64_t)gr->clock_offset;
  stepscope_record rec;
  int rc = 0;
#define EMIT()                                                                                     \
  do {                                                                                             \
    if (stepscope_write(w, &rec) != 0) rc = -1;                                                    \
  } while (0)
  /* anchors at true 0 and true 1e9 */
  for (int k = 0; k < 2; k++) {
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_CLOCK_ANCHOR;
    uint64_t t_true = (uint64_t)k * 1000000000ull;
    rec.u.clock_anchor.trace_ns = t_true + off;
    rec.u.clock_anchor.monotonic_ns = t_true + off;
    rec.u.clock_anchor.realtime_ns = (uint64_t)(RT_BASE + (int64_t)t_true + gr->anchor_error);
    EMIT();
  }
  for (int l = 0; l < gr->nlanes; l++) {
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_STREAM;
    rec.u.stream.stream = stream_id(l);
    rec.u.stream.stream_kind = gr->cpu_backend ? STEPSCOPE_STREAM_CPU : STEPSCOPE_STREAM_GPU;
    rec.u.stream.device = (uint32_t)(r % 8);
    rec.u.stream.name = stepscope_intern(w, gr->lane_name[l] ? gr->lane_name[l] : "stream");
    EMIT();
  }
  uint64_t thread = 100 + (uint64_t)r;
  uint32_t s_step = stepscope_intern(w, "step"), s_dom = stepscope_intern(w, "stepscope");
  for (size_t i = 0; i < g->nsteps; i++) {
    const gen_step *st = &g->steps[i];
    if (st->rank != r) continue;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_RANGE;
    rec.u.range.start_ns = (uint64_t)st->s + off;
    rec.u.range.end_ns = (uint64_t)st->e + off;
    rec.u.range.thread = thread;
    rec.u.range.name = s_step;
    rec.u.range.domain = s_dom;
    rec.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    rec.u.range.payload = (uint64_t)st->number;
    EMIT();
  }
  uint32_t s_load =
      stepscope_intern(w, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  uint32_t s_py = stepscope_intern(w, "user_annotation");
  for (size_t i = 0; i < g->nloads; i++) {
    const gen_load *ld = &g->loads[i];
    if (ld->rank != r) continue;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_RANGE;
    rec.u.range.start_ns = (uint64_t)ld->s + off;
    rec.u.range.end_ns = (uint64_t)ld->e + off;
    rec.u.range.thread = thread;
    rec.u.range.name = s_load;
    rec.u.range.domain = s_py;
    EMIT();
  }
  for (size_t i = 0; i < g->nranges; i++) {
    const gen_range *gr2 = &g->ranges[i];
    if (gr2->rank != r) continue;
    char args[64];
    snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d}", gr2->mb, gr->stage);
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_RANGE;
    rec.u.range.start_ns = (uint64_t)gr2->s + off;
    rec.u.range.end_ns = (uint64_t)gr2->e + off;
    rec.u.range.thread = thread;
    rec.u.range.name = stepscope_intern(w, gr2->name);
    rec.u.range.args = stepscope_intern(w, args);
    EMIT();
  }
  for (size_t i = 0; i < g->nsyncs; i++) {
    const gen_sync *sy = &g->syncs[i];
    if (sy->rank != r) continue;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_SYNC;
    rec.u.sync.start_ns = (uint64_t)sy->s + off;
    rec.u.sync.end_ns = (uint64_t)sy->e + off;
    rec.u.sync.stream = stream_id(sy->lane);
    rec.u.sync.sync_kind = STEPSCOPE_SYNC_STREAM_WAIT_EVENT;
    rec.u.sync.event_id = 1;
    EMIT();
  }
  uint32_t s_launch = stepscope_intern(w, gr->cpu_backend ? "enqueue" : "cudaLaunchKernel");
  uint32_t s_graph = stepscope_intern(w, "cudaGraphLaunch");
  for (size_t i = 0; i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r) continue;
    uint64_t corr = 1 + i;
    const gen_coll *c = o->coll >= 0 ? &g->colls[o->coll] : NULL;
    int first_of_graph = 1;
    if (o->graph) { /* a graph replay: one launch call, its id on every kernel */
      for (size_t j = 0; j < i && first_of_graph; j++)
        if (g->ops[j].rank == r && g->ops[j].graph == o->graph) {
          corr = 1 + j;
          first_of_graph = 0;
        }
    }
    if (o->has_launch && first_of_graph) {
      memset(&rec, 0, sizeof rec);
      rec.kind = STEPSCOPE_REC_API;
      rec.u.api.start_ns = (uint64_t)o->launch_s + off;
      rec.u.api.end_ns = (uint64_t)o->launch_e + off;
      rec.u.api.correlation_id = corr;
      rec.u.api.thread = thread;
      rec.u.api.name = o->graph ? s_graph : s_launch;
      rec.u.api.api_kind = gr->cpu_backend ? STEPSCOPE_API_HOST_ENQUEUE : STEPSCOPE_API_RUNTIME;
      EMIT();
    }
    memset(&rec, 0, sizeof rec);
    uint32_t name = stepscope_intern(w, o->name ? o->name : "kernel");
    if (gr->cpu_backend) {
      rec.kind = STEPSCOPE_REC_HOST_OP;
      stepscope_host_op *hop = &rec.u.host_op;
      hop->start_ns = (uint64_t)o->s + off;
      hop->end_ns = (uint64_t)o->e + off;
      hop->stream = stream_id(o->lane);
      hop->correlation_id = corr;
      hop->bytes = o->bytes;
      hop->name = name;
      hop->category = o->cls == GEN_COMM     ? STEPSCOPE_CAT_COMM
                      : o->cls == GEN_MEMCPY ? STEPSCOPE_CAT_MEMCPY
                      : o->cls == GEN_MEMSET ? STEPSCOPE_CAT_MEMSET
                                             : STEPSCOPE_CAT_COMPUTE;
      if (c && c->record) {
        hop->comm_id = c->comm_id;
        hop->seq = c->seq;
      }
    } else if (o->cls == GEN_MEMCPY) {
      rec.kind = STEPSCOPE_REC_MEMCPY;
      rec.u.memcpy.start_ns = (uint64_t)o->s + off;
      rec.u.memcpy.end_ns = (uint64_t)o->e + off;
      rec.u.memcpy.correlation_id = corr;
      rec.u.memcpy.stream = stream_id(o->lane);
      rec.u.memcpy.bytes = o->bytes;
      rec.u.memcpy.copy_kind = STEPSCOPE_MEMCPY_HTOD;
    } else if (o->cls == GEN_MEMSET) {
      rec.kind = STEPSCOPE_REC_MEMSET;
      rec.u.memset.start_ns = (uint64_t)o->s + off;
      rec.u.memset.end_ns = (uint64_t)o->e + off;
      rec.u.memset.correlation_id = corr;
      rec.u.memset.stream = stream_id(o->lane);
      rec.u.memset.bytes = o->bytes;
    } else {
      rec.kind = STEPSCOPE_REC_KERNEL;
      rec.u.kernel.start_ns = (uint64_t)o->s + off;
      rec.u.kernel.end_ns = (uint64_t)o->e + off;
      rec.u.kernel.correlation_id = corr;
      rec.u.kernel.stream = stream_id(o->lane);
      rec.u.kernel.name = name;
      rec.u.kernel.device = (uint32_t)(r % 8);
    }
    EMIT();
    if (c && c->record) {
      int m = 0;
      while (m < c->nmembers && c->member_op[m] != (int)i)
        m++;
      memset(&rec, 0, sizeof rec);
      rec.kind = STEPSCOPE_REC_COLLECTIVE;
      stepscope_collective *x = &rec.u.collective;
      x->start_ns = (uint64_t)o->s + off;
      x->end_ns = (uint64_t)o->e + off;
      x->comm_id = c->comm_id;
      x->seq = c->seq;
      x->bytes = m < c->nmembers && c->member_bytes[m] ? c->member_bytes[m] : c->bytes;
      x->count = x->bytes / 4;
      x->datatype = STEPSCOPE_DT_FLOAT32;
      x->stream = stream_id(o->lane);
      x->correlation_id = gr->cpu_backend ? 0 : corr;
      x->op = c->op;
      x->peer = -1;
      x->comm_rank = m < c->nmembers ? c->member_comm_rank[m] : 0;
      x->comm_size = c->comm_size;
      x->flags = c->flags | (gr->cpu_backend ? 0 : STEPSCOPE_COLL_F_GPU_TIMED);
      x->name = stepscope_intern(w, c->group ? c->group : "world");
      EMIT();
    }
  }
  /* metadata */
  char json[512];
  int pp = g->pp > 1 ? g->pp : 1;
  snprintf(json, sizeof json,
           "{\"world\":%d,\"dp\":%d,\"tp\":1,\"pp\":%d,\"cp\":1,\"rank\":%d,\"pp_rank\":%d}",
           g->nranks, g->nranks / pp ? g->nranks / pp : 1, pp, r, gr->stage >= 0 ? gr->stage : 0);
  stepscope_metadata md = {"layout", json};
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_METADATA;
  rec.u.metadata = md;
  EMIT();
  if (g->pp > 1) {
    snprintf(json, sizeof json,
             "{\"name\":\"1f1b\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":1}", g->pp,
             g->microbatches);
    rec.u.metadata.key = "schedule";
    rec.u.metadata.value_json = json;
    EMIT();
  }
  if (g->with_flops) {
    snprintf(json, sizeof json,
             "{\"model_flops_per_step\":%.17g,\"hardware_flops_per_step\":%.17g,\"tokens_per_"
             "step\":4096,\"peak_flops_per_device\":%.17g,\"world\":%d}",
             g->model_flops, g->hardware_flops, g->peak_flops, g->nranks);
    rec.u.metadata.key = "flops";
    rec.u.metadata.value_json = json;
    EMIT();
  }
  if (g->with_machine) {
    snprintf(json, sizeof json, "{\"cpus\":%.17g,\"load_1m_start\":%.17g,\"load_1m_end\":%.17g}",
             g->machine_cpus, g->machine_load_start, g->machine_load_end);
    rec.u.metadata.key = "machine";
    rec.u.metadata.value_json = json;
    EMIT();
  }
#undef EMIT
  if (stepscope_writer_close(w, &err) != 0) {
    snprintf(errbuf, errlen, "%s", err.message);
    return -1;
  }
  if (rc) snprintf(errbuf, errlen, "%s: a record could not be written", path);
  return rc;
}

int gen_write(const gen_run *g, const char *dir, char *errbuf, size_t errlen) {
  mkdir(dir, 0755);
  for (int r = 0; r < g->nranks; r++) {
    if (!g->ranks[r].present) continue;
    if (write_rank(g, r, dir, errbuf, errlen)) return -1;
  }
  return 0;
}
