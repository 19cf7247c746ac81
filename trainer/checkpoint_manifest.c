/*
 * checkpoint_manifest.c — manifest.json of a checkpoint: writing it (the configuration, the
 * layout, the step, every shard's size and CRC), reading it back with a small skimmer that
 * walks objects and arrays without building a tree (it needs only a few numbers and
 * strings, and must not crash on a damaged file), comparing it with a configuration, and
 * ckpt_check_config: the check of --checkpoint-dir / --resume against the checkpoints on
 * disk that main.c runs after config_validate, before anything starts.
 *
 * Why a file of its own: the manifest is the one JSON file of a checkpoint and the part a
 * person reads; shards are checkpoint.c's, the files and directories checkpoint_files.c's.
 */
#include "checkpoint_internal.h"
#include "sc_json_skim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the manifest: writing ----------------------------------------------------------- */

char *ckpt_manifest_text(const train_config *c, long long step, const shard_info *shards) {
  char *cfg_json = config_to_json(c);
  if (!cfg_json) return NULL;
  size_t n = 4096 + strlen(cfg_json) + (size_t)c->world * 128;
  char *b = malloc(n);
  if (!b) {
    free(cfg_json);
    return NULL;
  }
  size_t at = 0;
#define OUT(...) at += (size_t)snprintf(b + at, at < n ? n - at : 0, __VA_ARGS__)
  OUT("{\"format\":\"stepscope-checkpoint\",\"version\":%d,\"step\":%lld,\n", CKPT_VERSION, step);
  OUT(" \"layout\":{\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"zero\":%d,"
      "\"bucket_mb\":%.17g,\"virtual_stages\":%d,\"experts\":%d,\"top_k\":%d,"
      "\"moe_every\":%d,\"ep\":%d},\n",
      c->world, c->dp, c->tp, c->pp, c->cp, c->zero, c->bucket_mb, c->virtual_stages, c->experts,
      c->top_k, c->moe_every, c->ep);
  OUT(" \"model\":{\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"vocab\":%d,\"max_seq\":%d},\n",
      c->layers, c->hidden, c->heads, c->vocab, c->max_seq);
  OUT(" \"data\":{\"seed\":%llu,\"next_step\":%lld,\"batch\":%d,\"seq\":%d},\n", c->seed, step,
      c->batch, c->seq);
  OUT(" \"schedule\":{\"next_step\":%lld,\"steps\":%d,\"warmup\":%d,\"lr\":%.17g,"
      "\"min_lr_ratio\":%.17g},\n",
      step, c->steps, c->warmup, c->lr, c->min_lr_ratio);
  OUT(" \"config\":%s,\n \"shards\":[", cfg_json);
  for (int r = 0; r < c->world; r++) {
    char name[32];
    ckpt_shard_name(name, sizeof name, r);
    OUT("%s\n  {\"rank\":%d,\"file\":\"%s\",\"bytes\":%lld,\"crc32\":\"%08x\"}", r ? "," : "", r,
        name, shards[r].bytes, (unsigned)shards[r].crc);
  }
  OUT("]}\n");
#undef OUT
  free(cfg_json);
  if (at >= n) {
    free(b);
    return NULL;
  }
  return b;
}

/* ---- the manifest: reading (a skimmer, no tree) ------------------------------------------ */

/* The value of member `key` of the object at obj, or NULL (common/sc_json_skim.h). */
static const char *json_get(const char *obj, const char *key) {
  return obj ? sc_json_member(obj, key, strlen(key)) : NULL;
}

static int json_ll(const char *v, long long *out) {
  if (!v || (*v != '-' && (*v < '0' || *v > '9'))) return -1;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || !strchr(",}] \t\r\n", *end) || !*end) return -1;
  *out = x;
  return 0;
}

static int json_ull(const char *v, unsigned long long *out) {
  if (!v || *v < '0' || *v > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || !*end || !strchr(",}] \t\r\n", *end)) return -1;
  *out = x;
  return 0;
}

static int json_double(const char *v, double *out) {
  if (!v) return -1;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || !*end || !strchr(",}] \t\r\n", *end)) return -1;
  *out = x;
  return 0;
}

/* a string without escapes */
static int json_str(const char *v, char *out, size_t n) {
  if (!v || *v != '"') return -1;
  size_t i = 0;
  for (v++; *v != '"'; v++) {
    if (!*v || *v == '\\' || i + 1 >= n) return -1;
    out[i++] = *v;
  }
  out[i] = '\0';
  return 0;
}

static int manifest_parse(const char *text, const char *path, manifest *m, char *err, size_t n) {
  memset(m, 0, sizeof *m);
  char format[64];
  if (json_str(json_get(text, "format"), format, sizeof format) != 0 ||
      strcmp(format, "stepscope-checkpoint") != 0)
    return ckpt_errf(err, n, "checkpoint: %s: not a stepscope checkpoint manifest", path);
  const char *layout = json_get(text, "layout"), *shape = json_get(text, "model");
  const char *data = json_get(text, "data"), *sched = json_get(text, "schedule");
  struct {
    const char *obj, *key;
    long long *dst;
  } ints[] = {{text, "version", &m->version}, {text, "step", &m->step},
              {layout, "world", &m->world},   {layout, "dp", &m->dp},
              {layout, "tp", &m->tp},         {layout, "pp", &m->pp},
              {layout, "zero", &m->zero},     {shape, "layers", &m->layers},
              {shape, "hidden", &m->hidden},  {shape, "heads", &m->heads},
              {shape, "vocab", &m->vocab},    {shape, "max_seq", &m->max_seq},
              {sched, "steps", &m->steps},    {sched, "warmup", &m->warmup}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (json_ll(json_get(ints[i].obj, ints[i].key), ints[i].dst) != 0)
      return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (no integer \"%s\")", path,
                       ints[i].key);
  if (json_ull(json_get(data, "seed"), &m->seed) != 0 ||
      json_double(json_get(sched, "lr"), &m->lr) != 0 ||
      json_double(json_get(sched, "min_lr_ratio"), &m->min_lr_ratio) != 0)
    return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (data.seed, schedule.lr)", path);
  if (json_double(json_get(layout, "bucket_mb"), &m->bucket_mb) != 0) m->bucket_mb = 0;
  if (json_ll(json_get(layout, "virtual_stages"), &m->virtual_stages) != 0) m->virtual_stages = 1;
  if (json_ll(json_get(layout, "experts"), &m->experts) != 0) m->experts = 0;
  if (json_ll(json_get(layout, "top_k"), &m->top_k) != 0) m->top_k = 2;
  if (json_ll(json_get(layout, "moe_every"), &m->moe_every) != 0) m->moe_every = 1;
  if (json_ll(json_get(layout, "ep"), &m->ep) != 0) m->ep = 1;
  if (m->version != CKPT_VERSION)
    return ckpt_errf(err, n, "checkpoint: %s: format version %lld, this build reads %d", path,
                     m->version, CKPT_VERSION);
  if (m->world < 1 || m->world > MAX_WORLD || m->step < 0)
    return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (world %lld, step %lld)", path,
                     m->world, m->step);
  const char *p = json_get(text, "shards");
  if (!p || *p != '[')
    return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (no \"shards\" array)", path);
  int seen[MAX_WORLD] = {0};
  p = sc_json_ws(p + 1);
  while (*p != ']') {
    long long rank, bytes;
    char crc[16];
    char file[32];
    if (json_ll(json_get(p, "rank"), &rank) != 0 || rank < 0 || rank >= m->world || seen[rank] ||
        json_ll(json_get(p, "bytes"), &bytes) != 0 || bytes < 0 ||
        json_str(json_get(p, "crc32"), crc, sizeof crc) != 0 || strlen(crc) != 8 ||
        strspn(crc, "0123456789abcdef") != 8 ||
        json_str(json_get(p, "file"), file, sizeof file) != 0)
      return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (a bad \"shards\" entry)", path);
    seen[rank] = 1;
    m->shard[rank].bytes = bytes;
    m->shard[rank].crc = (uint32_t)strtoul(crc, NULL, 16);
    snprintf(m->file[rank], sizeof m->file[rank], "%s", file);
    p = sc_json_skip_value(p);
    if (!p) return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (shards)", path);
    p = sc_json_ws(p);
    if (*p == ',')
      p = sc_json_ws(p + 1);
    else if (*p != ']')
      return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (shards)", path);
  }
  for (int r = 0; r < m->world; r++)
    if (!seen[r])
      return ckpt_errf(err, n, "checkpoint: %s: the manifest lists no shard for rank %d", path, r);
  return 0;
}

int ckpt_manifest_read(const char *path, manifest *m, char *err, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ckpt_errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (off_t)MANIFEST_MAX_BYTES) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: %s: empty, unreadable or larger than %u bytes", path,
                     MANIFEST_MAX_BYTES);
  }
  char *text = malloc((size_t)st.st_size + 1);
  if (!text) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: out of memory reading %s", path);
  }
  int rc = ckpt_read_all(fd, text, (size_t)st.st_size);
  close(fd);
  if (rc != 0) {
    free(text);
    return ckpt_errf(err, n, "checkpoint: cannot read %s", path);
  }
  text[st.st_size] = '\0';
  if (strlen(text) != (size_t)st.st_size) {
    free(text);
    return ckpt_errf(err, n, "checkpoint: %s: malformed manifest (a NUL byte)", path);
  }
  rc = manifest_parse(text, path, m, err, n);
  free(text);
  return rc;
}

/* Whether the manifest was written by a run this configuration may resume;
 * names the first option that differs. */
int ckpt_manifest_compare(const manifest *m, const train_config *c, int check_vocab,
                          const char *path, char *err, size_t n) {
  struct {
    const char *option;
    long long mine, saved;
  } f[] = {{"--world", c->world, m->world},
           {"--tp", c->tp, m->tp},
           {"--pp", c->pp, m->pp},
           {"--dp", c->dp, m->dp},
           {"--zero", c->zero, m->zero},
           {"--layers", c->layers, m->layers},
           {"--hidden", c->hidden, m->hidden},
           {"--heads", c->heads, m->heads},
           {"--vocab", c->vocab, m->vocab},
           {"--model (positions)", c->max_seq, m->max_seq},
           {"--virtual-stages", c->virtual_stages, m->virtual_stages},
           {"--experts", c->experts, m->experts},
           {"--top-k", c->top_k, m->top_k},
           {"--moe-every", c->moe_every, m->moe_every},
           {"--ep", c->ep, m->ep}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (!check_vocab && !strcmp(f[i].option, "--vocab")) continue;
    if (c->experts == 0 && m->experts == 0 && strncmp(f[i].option, "--experts", 9) != 0 &&
        (!strcmp(f[i].option, "--top-k") || !strcmp(f[i].option, "--moe-every") ||
         !strcmp(f[i].option, "--ep")))
      continue; /* a dense model: the MoE options have no effect */
    if (f[i].mine != f[i].saved)
      return ckpt_errf(err, n,
                       "--resume: %s %lld differs from the checkpoint's %lld (%s); resuming "
                       "needs the same model shape (with experts: --experts, --top-k, "
                       "--moe-every, --ep), --world/--dp/--tp/--pp, --virtual-stages, --zero "
                       "and --seed",
                       f[i].option, f[i].mine, f[i].saved, path);
  }
  if (c->zero >= 2 && m->bucket_mb > 0 && c->bucket_mb != m->bucket_mb)
    return ckpt_errf(err, n,
                     "--resume: --bucket-mb %g differs from the checkpoint's %g (%s); under "
                     "--zero %d the gradient and AdamW shards are cut bucket by bucket",
                     c->bucket_mb, m->bucket_mb, path, c->zero);
  if (c->seed != m->seed)
    return ckpt_errf(err, n,
                     "--resume: --seed %llu differs from the checkpoint's %llu (%s); the data "
                     "order depends on it",
                     c->seed, m->seed, path);
  return 0;
}

int ckpt_check_config(const train_config *c, char *err, size_t n) {
  const char *dir = c->checkpoint_dir;
  struct stat st;
  if (stat(dir, &st) == 0 && (!S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0))
    return ckpt_errf(err, n, "--checkpoint-dir %s: not a writable directory", dir);
  long long step;
  int found = ckpt_latest_complete(dir, &step, err, n);
  if (found < 0) return -1;
  if (!c->resume) {
    if (found)
      return ckpt_errf(err, n,
                       "--checkpoint-dir %s already holds checkpoints (latest: step %lld); pass "
                       "--resume to continue from it, or choose another directory",
                       dir, step);
    return 0;
  }
  if (!found)
    return ckpt_errf(err, n,
                     "--resume: no complete checkpoint in --checkpoint-dir %s (a checkpoint is "
                     "complete once its step-N/" MANIFEST_NAME " exists)",
                     dir);
  char path[1200], sd[1024];
  ckpt_step_dir_path(sd, sizeof sd, dir, step);
  snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
  manifest *m = malloc(sizeof *m);
  if (!m) return ckpt_errf(err, n, "checkpoint: out of memory");
  int rc = ckpt_manifest_read(path, m, err, n);
  if (rc == 0) rc = ckpt_manifest_compare(m, c, c->vocab_given, path, err, n);
  free(m);
  return rc;
}
