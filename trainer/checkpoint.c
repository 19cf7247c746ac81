/*
 * checkpoint.c — atomic, sharded checkpoints of a training run (see checkpoint.h
 * for the layout on disk, the protocol and what is restored).
 *
 * How it works:
 *   - Saving: each rank copies its parameters and AdamW moments from the device
 *     through a host staging buffer (a few MiB at a time), computing a CRC32 as
 *     it writes rank-NNNNN.ckpt.tmp; fsync, rename, fsync the directory. One
 *     all-reduce over the world then carries, per rank, a failure flag, the
 *     shard's size and its CRC (each rank fills its own row of a world x 3
 *     array of doubles; sizes below 2^53 and CRCs are exact in a double), so
 *     every rank knows whether all shards are durable and rank 0 knows every
 *     size and checksum. Rank 0 writes manifest.json (again .tmp, fsync,
 *     rename, fsync) and prunes old checkpoints; a second all-reduce reports
 *     its outcome, so every rank succeeds or fails together.
 *   - Loading: rank 0 picks the latest complete checkpoint and an all-reduce
 *     tells the others (so a directory that changes under us cannot split the
 *     ranks); every rank reads the manifest, checks it against its
 *     configuration, checks its shard's size, streams it to the device
 *     computing the CRC, and only then trusts the header; a final all-reduce
 *     makes every rank fail if one did.
 *   - The manifest is JSON written here and read back by a small skimmer that
 *     walks objects and arrays without building a tree (it only needs a few
 *     numbers and strings, and must not crash on a damaged file).
 * Library code: errors are returned as messages naming the file; the only
 * deliberate process exit is the hidden --debug-die-in-checkpoint testing aid.
 */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAGIC "SSCKPT\r\n" /* 8 bytes; \r\n catches text-mode mangling */
#define CKPT_VERSION 1
#define MANIFEST_NAME "manifest.json"
#define MANIFEST_MAX_BYTES (1u << 20)
#define STAGING_BYTES ((size_t)4 << 20)
#define MAX_WORLD 64

/* shard header: the magic, then these 64-bit words (native byte order) */
enum {
    H_VERSION,
    H_STEP,
    H_SEED,
    H_RANK,
    H_WORLD,
    H_DP,
    H_TP,
    H_PP,
    H_DP_RANK,
    H_TP_RANK,
    H_PP_RANK,
    H_ZERO,
    H_LAYERS,
    H_HIDDEN,
    H_HEADS,
    H_VOCAB,
    H_MAX_SEQ,
    H_PARAM_FLOATS,
    H_STATE_FLOATS,
    H_STATE_OFFSET,
    H_WORDS
};
#define HEADER_BYTES (8 + 8 * (size_t)H_WORDS)

static int errf(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- CRC-32 -------------------------------------------------------------------------- */

/* Table-driven, eight bytes per step ("slicing by 8"): table[k][b] is the CRC
 * contribution of byte b followed by k zero bytes, so eight lookups replace
 * eight dependent single-byte steps (several times faster on large shards). */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            crc_table[k][i] =
                crc_table[0][crc_table[k - 1][i] & 0xffu] ^ (crc_table[k - 1][i] >> 8);
}

uint32_t ckpt_crc32(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = buf;
    crc = ~crc;
    for (; len >= 8; p += 8, len -= 8) {
        /* the bytes are combined explicitly, so the result does not depend on alignment
         * or on the host's byte order */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xffu] ^ crc_table[6][(lo >> 8) & 0xffu] ^
              crc_table[5][(lo >> 16) & 0xffu] ^ crc_table[4][lo >> 24] ^
              crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    for (; len > 0; p++, len--)
        crc = crc_table[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* ---- files ---------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 0, -1 with errno, or 1 at a premature end of file */
static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return 1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Makes the directory's entries (a rename, a new file or subdirectory) durable. */
static int fsync_dir(const char *dir, char *err, size_t n)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errf(err, n, "checkpoint: %s: cannot open the directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EINVAL && e != EROFS) /* some filesystems cannot sync directories */
        return errf(err, n, "checkpoint: %s: fsync of the directory failed: %s", dir,
                    strerror(e));
    return 0;
}

/* mkdir -p; each created level's parent is fsync'd so the new entry is durable. */
static int mkdir_p(const char *path, char *err, size_t n)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return errf(err, n, "checkpoint: %s: path too long", path);
    size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) == 0) {
            char parent[1024];
            snprintf(parent, sizeof parent, "%s", buf);
            char *slash = strrchr(parent, '/');
            if (slash == parent)
                slash[1] = '\0';
            else if (slash)
                *slash = '\0';
            else
                snprintf(parent, sizeof parent, ".");
            if (fsync_dir(parent, err, n) != 0)
                return -1;
        } else if (errno != EEXIST) {
            return errf(err, n, "checkpoint: cannot create %s: %s", buf, strerror(errno));
        } else {
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
                return errf(err, n, "checkpoint: %s exists and is not a directory", buf);
        }
        buf[i] = saved;
    }
    return 0;
}

static void step_dir_path(char *buf, size_t n, const char *dir, long long step)
{
    snprintf(buf, n, "%s/step-%08lld", dir, step);
}

static void shard_name(char *buf, size_t n, int rank) { snprintf(buf, n, "rank-%05d.ckpt", rank); }

/* ---- the checkpoint directory -------------------------------------------------------- */

typedef struct step_entry {
    long long step;
    int complete;
} step_entry;

static int cmp_entry(const void *a, const void *b)
{
    long long x = ((const step_entry *)a)->step, y = ((const step_entry *)b)->step;
    return x < y ? -1 : x > y;
}

/* "step-" followed by digits only */
static int parse_step_name(const char *name, long long *step)
{
    if (strncmp(name, "step-", 5) != 0 || !name[5])
        return 0;
    long long v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000000LL)
            return 0;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 1;
}

/* The step-* subdirectories of dir, sorted by step; a missing dir has none. */
static int list_steps(const char *dir, step_entry **out, int *count, char *err, size_t n)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return errf(err, n, "checkpoint: %s: cannot read the directory: %s", dir, strerror(errno));
    }
    step_entry *v = NULL;
    int len = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long long step;
        if (!parse_step_name(de->d_name, &step))
            continue;
        if (len == cap) {
            int ncap = cap ? 2 * cap : 16;
            step_entry *nv = realloc(v, (size_t)ncap * sizeof *nv);
            if (!nv) {
                free(v);
                closedir(d);
                return errf(err, n, "checkpoint: out of memory listing %s", dir);
            }
            v = nv;
            cap = ncap;
        }
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/" MANIFEST_NAME, dir, de->d_name);
        v[len].step = step;
        v[len].complete = stat(path, &st) == 0 && S_ISREG(st.st_mode);
        len++;
    }
    closedir(d);
    if (len > 1)
        qsort(v, (size_t)len, sizeof *v, cmp_entry);
    *out = v;
    *count = len;
    return 0;
}

int ckpt_latest_complete(const char *dir, long long *step, char *err, size_t n)
{
    step_entry *v;
    int count;
    if (list_steps(dir, &v, &count, err, n) != 0)
        return -1;
    int found = 0;
    for (int i = count - 1; i >= 0 && !found; i--)
        if (v[i].complete) {
            *step = v[i].step;
            found = 1;
        }
    free(v);
    return found;
}

static void debug_die(void);

/* Removes one checkpoint directory: the manifest first (so a crash midway
 * leaves an incomplete checkpoint, never a complete one missing a shard).
 * `die_midway`: testing, SIGKILL once the manifest is gone. */
static int remove_checkpoint(const char *dir, long long step, int die_midway, char *err,
                             size_t n)
{
    char sd[1024], path[1400];
    step_dir_path(sd, sizeof sd, dir, step);
    snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
    if (unlink(path) != 0 && errno != ENOENT)
        return errf(err, n, "checkpoint: cannot remove %s: %s", path, strerror(errno));
    if (fsync_dir(sd, err, n) != 0)
        return -1;
    if (die_midway)
        debug_die();
    DIR *d = opendir(sd);
    if (!d)
        return errf(err, n, "checkpoint: cannot read %s: %s", sd, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", sd, de->d_name);
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = errf(err, n, "checkpoint: cannot remove %s: %s", path, strerror(errno));
            break;
        }
    }
    closedir(d);
    if (rc != 0)
        return -1;
    if (rmdir(sd) != 0 && errno != ENOENT)
        return errf(err, n, "checkpoint: cannot remove %s: %s", sd, strerror(errno));
    return 0;
}

/* Keeps the newest `keep` complete checkpoints; drops older complete ones and
 * incomplete ones older than the newest complete one (debris of a crash).
 * Incomplete ones newer than it may be being written and are left alone. */
static int prune(const char *dir, int keep, int die_midway, char *err, size_t n)
{
    step_entry *v;
    int count;
    if (list_steps(dir, &v, &count, err, n) != 0)
        return -1;
    long long newest = -1;
    int seen = 0, rc = 0, removed = 0;
    for (int i = count - 1; i >= 0 && rc == 0; i--) {
        if (v[i].complete) {
            if (newest < 0)
                newest = v[i].step;
            if (++seen <= keep)
                continue;
        } else if (newest < 0) {
            continue;
        }
        rc = remove_checkpoint(dir, v[i].step, die_midway, err, n);
        removed++;
    }
    free(v);
    if (rc == 0 && removed)
        rc = fsync_dir(dir, err, n);
    return rc;
}

/* ---- the manifest: writing ----------------------------------------------------------- */

typedef struct shard_info {
    long long bytes;
    uint32_t crc;
} shard_info;

static char *manifest_text(const train_config *c, long long step, const shard_info *shards)
{
    char *cfg_json = config_to_json(c);
    if (!cfg_json)
        return NULL;
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
        c->world, c->dp, c->tp, c->pp, c->cp, c->zero, c->bucket_mb, c->virtual_stages,
        c->experts, c->top_k, c->moe_every, c->ep);
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
        shard_name(name, sizeof name, r);
        OUT("%s\n  {\"rank\":%d,\"file\":\"%s\",\"bytes\":%lld,\"crc32\":\"%08x\"}", r ? "," : "",
            r, name, shards[r].bytes, (unsigned)shards[r].crc);
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

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* p at '"': past the closing quote, or NULL */
static const char *skip_string(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\') {
            if (!p[1])
                return NULL;
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* past one value (scalar, string, object or array), or NULL when malformed */
static const char *skip_value(const char *p)
{
    p = skip_ws(p);
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                p = skip_string(p);
                if (!p)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']')
                depth--;
            p++;
            if (depth == 0)
                return p;
        }
        return NULL;
    }
    const char *start = p;
    while (*p && !strchr(",}] \t\r\n", *p))
        p++;
    return p == start ? NULL : p;
}

/* The value of member `key` of the object at obj, or NULL. */
static const char *json_get(const char *obj, const char *key)
{
    if (!obj)
        return NULL;
    const char *p = skip_ws(obj);
    if (*p != '{')
        return NULL;
    p++;
    size_t klen = strlen(key);
    for (;;) {
        p = skip_ws(p);
        if (*p != '"')
            return NULL;
        const char *ks = p + 1, *ke = skip_string(p);
        if (!ke)
            return NULL;
        int match = (size_t)(ke - 1 - ks) == klen && !memcmp(ks, key, klen);
        p = skip_ws(ke);
        if (*p != ':')
            return NULL;
        p = skip_ws(p + 1);
        if (match)
            return p;
        p = skip_value(p);
        if (!p)
            return NULL;
        p = skip_ws(p);
        if (*p != ',')
            return NULL;
        p++;
    }
}

static int json_ll(const char *v, long long *out)
{
    if (!v || (*v != '-' && (*v < '0' || *v > '9')))
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || !strchr(",}] \t\r\n", *end) || !*end)
        return -1;
    *out = x;
    return 0;
}

static int json_ull(const char *v, unsigned long long *out)
{
    if (!v || *v < '0' || *v > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || !*end || !strchr(",}] \t\r\n", *end))
        return -1;
    *out = x;
    return 0;
}

static int json_double(const char *v, double *out)
{
    if (!v)
        return -1;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || !*end || !strchr(",}] \t\r\n", *end))
        return -1;
    *out = x;
    return 0;
}

/* a string without escapes */
static int json_str(const char *v, char *out, size_t n)
{
    if (!v || *v != '"')
        return -1;
    size_t i = 0;
    for (v++; *v != '"'; v++) {
        if (!*v || *v == '\\' || i + 1 >= n)
            return -1;
        out[i++] = *v;
    }
    out[i] = '\0';
    return 0;
}

typedef struct manifest {
    long long version, step;
    long long world, dp, tp, pp, zero;
    long long layers, hidden, heads, vocab, max_seq;
    unsigned long long seed;
    long long steps, warmup;
    double lr, min_lr_ratio;
    double bucket_mb; /* 0 when the manifest predates it; ZeRO-2/3 shards are cut by bucket */
    long long virtual_stages; /* model chunks per rank; 1 when the manifest predates it */
    long long experts, top_k, moe_every, ep; /* 0 experts (dense) when it predates them */
    shard_info shard[MAX_WORLD];
    char file[MAX_WORLD][32];
} manifest;

static int manifest_parse(const char *text, const char *path, manifest *m, char *err, size_t n)
{
    memset(m, 0, sizeof *m);
    char format[64];
    if (json_str(json_get(text, "format"), format, sizeof format) != 0 ||
        strcmp(format, "stepscope-checkpoint") != 0)
        return errf(err, n, "checkpoint: %s: not a stepscope checkpoint manifest", path);
    const char *layout = json_get(text, "layout"), *shape = json_get(text, "model");
    const char *data = json_get(text, "data"), *sched = json_get(text, "schedule");
    struct {
        const char *obj, *key;
        long long *dst;
    } ints[] = {{text, "version", &m->version},   {text, "step", &m->step},
                {layout, "world", &m->world},     {layout, "dp", &m->dp},
                {layout, "tp", &m->tp},           {layout, "pp", &m->pp},
                {layout, "zero", &m->zero},       {shape, "layers", &m->layers},
                {shape, "hidden", &m->hidden},    {shape, "heads", &m->heads},
                {shape, "vocab", &m->vocab},      {shape, "max_seq", &m->max_seq},
                {sched, "steps", &m->steps},      {sched, "warmup", &m->warmup}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (json_ll(json_get(ints[i].obj, ints[i].key), ints[i].dst) != 0)
            return errf(err, n, "checkpoint: %s: malformed manifest (no integer \"%s\")", path,
                        ints[i].key);
    if (json_ull(json_get(data, "seed"), &m->seed) != 0 ||
        json_double(json_get(sched, "lr"), &m->lr) != 0 ||
        json_double(json_get(sched, "min_lr_ratio"), &m->min_lr_ratio) != 0)
        return errf(err, n, "checkpoint: %s: malformed manifest (data.seed, schedule.lr)", path);
    if (json_double(json_get(layout, "bucket_mb"), &m->bucket_mb) != 0)
        m->bucket_mb = 0;
    if (json_ll(json_get(layout, "virtual_stages"), &m->virtual_stages) != 0)
        m->virtual_stages = 1;
    if (json_ll(json_get(layout, "experts"), &m->experts) != 0)
        m->experts = 0;
    if (json_ll(json_get(layout, "top_k"), &m->top_k) != 0)
        m->top_k = 2;
    if (json_ll(json_get(layout, "moe_every"), &m->moe_every) != 0)
        m->moe_every = 1;
    if (json_ll(json_get(layout, "ep"), &m->ep) != 0)
        m->ep = 1;
    if (m->version != CKPT_VERSION)
        return errf(err, n, "checkpoint: %s: format version %lld, this build reads %d", path,
                    m->version, CKPT_VERSION);
    if (m->world < 1 || m->world > MAX_WORLD || m->step < 0)
        return errf(err, n, "checkpoint: %s: malformed manifest (world %lld, step %lld)", path,
                    m->world, m->step);
    const char *p = json_get(text, "shards");
    if (!p || *p != '[')
        return errf(err, n, "checkpoint: %s: malformed manifest (no \"shards\" array)", path);
    int seen[MAX_WORLD] = {0};
    p = skip_ws(p + 1);
    while (*p != ']') {
        long long rank, bytes;
        char crc[16];
        char file[32];
        if (json_ll(json_get(p, "rank"), &rank) != 0 || rank < 0 || rank >= m->world ||
            seen[rank] || json_ll(json_get(p, "bytes"), &bytes) != 0 || bytes < 0 ||
            json_str(json_get(p, "crc32"), crc, sizeof crc) != 0 || strlen(crc) != 8 ||
            strspn(crc, "0123456789abcdef") != 8 ||
            json_str(json_get(p, "file"), file, sizeof file) != 0)
            return errf(err, n, "checkpoint: %s: malformed manifest (a bad \"shards\" entry)",
                        path);
        seen[rank] = 1;
        m->shard[rank].bytes = bytes;
        m->shard[rank].crc = (uint32_t)strtoul(crc, NULL, 16);
        snprintf(m->file[rank], sizeof m->file[rank], "%s", file);
        p = skip_value(p);
        if (!p)
            return errf(err, n, "checkpoint: %s: malformed manifest (shards)", path);
        p = skip_ws(p);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p != ']')
            return errf(err, n, "checkpoint: %s: malformed manifest (shards)", path);
    }
    for (int r = 0; r < m->world; r++)
        if (!seen[r])
            return errf(err, n, "checkpoint: %s: the manifest lists no shard for rank %d", path, r);
    return 0;
}

static int manifest_read(const char *path, manifest *m, char *err, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (off_t)MANIFEST_MAX_BYTES) {
        close(fd);
        return errf(err, n, "checkpoint: %s: empty, unreadable or larger than %u bytes", path,
                    MANIFEST_MAX_BYTES);
    }
    char *text = malloc((size_t)st.st_size + 1);
    if (!text) {
        close(fd);
        return errf(err, n, "checkpoint: out of memory reading %s", path);
    }
    int rc = read_all(fd, text, (size_t)st.st_size);
    close(fd);
    if (rc != 0) {
        free(text);
        return errf(err, n, "checkpoint: cannot read %s", path);
    }
    text[st.st_size] = '\0';
    if (strlen(text) != (size_t)st.st_size) {
        free(text);
        return errf(err, n, "checkpoint: %s: malformed manifest (a NUL byte)", path);
    }
    rc = manifest_parse(text, path, m, err, n);
    free(text);
    return rc;
}

/* Whether the manifest was written by a run this configuration may resume;
 * names the first option that differs. */
static int manifest_compare(const manifest *m, const train_config *c, int check_vocab,
                            const char *path, char *err, size_t n)
{
    struct {
        const char *option;
        long long mine, saved;
    } f[] = {{"--world", c->world, m->world}, {"--tp", c->tp, m->tp},
             {"--pp", c->pp, m->pp},          {"--dp", c->dp, m->dp},
             {"--zero", c->zero, m->zero},     {"--layers", c->layers, m->layers},
             {"--hidden", c->hidden, m->hidden}, {"--heads", c->heads, m->heads},
             {"--vocab", c->vocab, m->vocab}, {"--model (positions)", c->max_seq, m->max_seq},
             {"--virtual-stages", c->virtual_stages, m->virtual_stages},
             {"--experts", c->experts, m->experts}, {"--top-k", c->top_k, m->top_k},
             {"--moe-every", c->moe_every, m->moe_every}, {"--ep", c->ep, m->ep}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!check_vocab && !strcmp(f[i].option, "--vocab"))
            continue;
        if (c->experts == 0 && m->experts == 0 && strncmp(f[i].option, "--experts", 9) != 0 &&
            (!strcmp(f[i].option, "--top-k") || !strcmp(f[i].option, "--moe-every") ||
             !strcmp(f[i].option, "--ep")))
            continue; /* a dense model: the MoE options have no effect */
        if (f[i].mine != f[i].saved)
            return errf(err, n,
                        "--resume: %s %lld differs from the checkpoint's %lld (%s); resuming "
                        "needs the same model shape (with experts: --experts, --top-k, "
                        "--moe-every, --ep), --world/--dp/--tp/--pp, --virtual-stages, --zero "
                        "and --seed",
                        f[i].option, f[i].mine, f[i].saved, path);
    }
    if (c->zero >= 2 && m->bucket_mb > 0 && c->bucket_mb != m->bucket_mb)
        return errf(err, n,
                    "--resume: --bucket-mb %g differs from the checkpoint's %g (%s); under "
                    "--zero %d the gradient and AdamW shards are cut bucket by bucket",
                    c->bucket_mb, m->bucket_mb, path, c->zero);
    if (c->seed != m->seed)
        return errf(err, n,
                    "--resume: --seed %llu differs from the checkpoint's %llu (%s); the data "
                    "order depends on it",
                    c->seed, m->seed, path);
    return 0;
}

int ckpt_check_config(const train_config *c, char *err, size_t n)
{
    const char *dir = c->checkpoint_dir;
    struct stat st;
    if (stat(dir, &st) == 0 && (!S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0))
        return errf(err, n, "--checkpoint-dir %s: not a writable directory", dir);
    long long step;
    int found = ckpt_latest_complete(dir, &step, err, n);
    if (found < 0)
        return -1;
    if (!c->resume) {
        if (found)
            return errf(err, n,
                        "--checkpoint-dir %s already holds checkpoints (latest: step %lld); pass "
                        "--resume to continue from it, or choose another directory",
                        dir, step);
        return 0;
    }
    if (!found)
        return errf(err, n,
                    "--resume: no complete checkpoint in --checkpoint-dir %s (a checkpoint is "
                    "complete once its step-N/" MANIFEST_NAME " exists)",
                    dir);
    char path[1200], sd[1024];
    step_dir_path(sd, sizeof sd, dir, step);
    snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
    manifest *m = malloc(sizeof *m);
    if (!m)
        return errf(err, n, "checkpoint: out of memory");
    int rc = manifest_read(path, m, err, n);
    if (rc == 0)
        rc = manifest_compare(m, c, c->vocab_given, path, err, n);
    free(m);
    return rc;
}

/* ---- agreement between ranks ------------------------------------------------------------ */

/* Sums `count` doubles over the world, in place, through a device buffer. */
static int world_sum(const ckpt_rank_state *s, double *host, size_t count, char *err, size_t n)
{
    double *d = s->ops->alloc(s->dev, count * sizeof(double));
    if (!d)
        return errf(err, n, "checkpoint: out of device memory");
    s->ops->copy_to_device(s->stream, d, host, count * sizeof(double));
    comm_allreduce(s->world, s->stream, d, count, COMM_FLOAT64);
    s->ops->copy_to_host(s->stream, host, d, count * sizeof(double));
    int rc = s->ops->stream_synchronize(s->stream);
    s->ops->free(s->dev, d);
    if (rc != 0)
        return errf(err, n, "checkpoint: agreement between ranks failed: %s",
                    dev_last_error(s->dev));
    return 0;
}

/* ---- shards ------------------------------------------------------------------------------- */

/* A shard after its header is a list of segments: device floats, or (before each extra
 * chunk of an interleaved rank) CHUNK_WORDS 64-bit words describing that chunk. */
#define CHUNK_WORDS 3
typedef struct segment {
    float *dev; /* NULL: the host words below */
    size_t floats;
    uint64_t words[CHUNK_WORDS];
} segment;

static int segment_count(const ckpt_rank_state *s) { return 3 + 4 * s->nmore; }

/* Fills seg[segment_count(s)]. */
static void segments_of(const ckpt_rank_state *s, segment *seg)
{
    seg[0] = (segment){s->param, s->param_floats, {0}};
    seg[1] = (segment){s->adam_m, s->state_floats, {0}};
    seg[2] = (segment){s->adam_v, s->state_floats, {0}};
    for (int j = 0; j < s->nmore; j++) {
        const ckpt_chunk *ch = &s->more[j];
        segment *g = seg + 3 + 4 * j;
        g[0] = (segment){NULL, 0, {ch->param_floats, ch->state_floats, ch->state_offset}};
        g[1] = (segment){ch->param, ch->param_floats, {0}};
        g[2] = (segment){ch->adam_m, ch->state_floats, {0}};
        g[3] = (segment){ch->adam_v, ch->state_floats, {0}};
    }
}

static void header_of(const ckpt_rank_state *s, long long step, unsigned char *out)
{
    const train_config *c = s->cfg;
    const model_grid *g = s->grid;
    uint64_t h[H_WORDS];
    h[H_VERSION] = CKPT_VERSION;
    h[H_STEP] = (uint64_t)step;
    h[H_SEED] = c->seed;
    h[H_RANK] = (uint64_t)g->rank;
    h[H_WORLD] = (uint64_t)g->world;
    h[H_DP] = (uint64_t)g->dp;
    h[H_TP] = (uint64_t)g->tp;
    h[H_PP] = (uint64_t)g->pp;
    h[H_DP_RANK] = (uint64_t)g->dp_rank;
    h[H_TP_RANK] = (uint64_t)g->tp_rank;
    h[H_PP_RANK] = (uint64_t)g->pp_rank;
    h[H_ZERO] = (uint64_t)c->zero;
    h[H_LAYERS] = (uint64_t)c->layers;
    h[H_HIDDEN] = (uint64_t)c->hidden;
    h[H_HEADS] = (uint64_t)c->heads;
    h[H_VOCAB] = (uint64_t)c->vocab;
    h[H_MAX_SEQ] = (uint64_t)c->max_seq;
    h[H_PARAM_FLOATS] = s->param_floats;
    h[H_STATE_FLOATS] = s->state_floats;
    h[H_STATE_OFFSET] = s->state_offset;
    memcpy(out, CKPT_MAGIC, 8);
    memcpy(out + 8, h, sizeof h);
}

static size_t shard_bytes_of(const ckpt_rank_state *s)
{
    size_t bytes = HEADER_BYTES + 4 * (s->param_floats + 2 * s->state_floats);
    for (int j = 0; j < s->nmore; j++)
        bytes += 8 * CHUNK_WORDS + 4 * (s->more[j].param_floats + 2 * s->more[j].state_floats);
    return bytes;
}

static int debug_die_here(const train_config *c, int rank, long long step, int point)
{
    return c->debug_ckpt_die_point == point && c->debug_ckpt_die_rank == rank &&
           c->debug_ckpt_die_step == step;
}

static void debug_die(void)
{
    fflush(stdout);
    fflush(stderr);
    raise(SIGKILL);
}

int ckpt_read_shard_params(const char *path, float **params, size_t *count, model_grid *grid,
                           char *err, size_t n)
{
    *params = NULL;
    *count = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
    unsigned char header[HEADER_BYTES];
    uint64_t h[H_WORDS];
    struct stat st;
    if (fstat(fd, &st) != 0 || read_all(fd, header, sizeof header) != 0 ||
        memcmp(header, CKPT_MAGIC, 8) != 0) {
        close(fd);
        return errf(err, n, "checkpoint: %s is not a stepscope checkpoint shard", path);
    }
    memcpy(h, header + 8, sizeof h);
    size_t floats = (size_t)h[H_PARAM_FLOATS];
    if (h[H_VERSION] != CKPT_VERSION || h[H_PARAM_FLOATS] > ((uint64_t)1 << 40) ||
        h[H_STATE_FLOATS] > ((uint64_t)1 << 40) ||
        (uint64_t)st.st_size < HEADER_BYTES + 4 * (uint64_t)floats) {
        close(fd);
        return errf(err, n, "checkpoint: %s: unsupported version or truncated shard", path);
    }
    float *p = malloc(floats ? floats * 4 : 4);
    if (!p) {
        close(fd);
        return errf(err, n, "checkpoint: out of memory reading %s", path);
    }
    if (read_all(fd, p, floats * 4) != 0) {
        free(p);
        close(fd);
        return errf(err, n, "checkpoint: cannot read %s", path);
    }
    /* an interleaved rank's further chunks: their parameters follow chunk 0's */
    uint64_t at = HEADER_BYTES + 4 * ((uint64_t)floats + 2 * h[H_STATE_FLOATS]);
    while (at < (uint64_t)st.st_size) {
        uint64_t w[CHUNK_WORDS];
        uint64_t left = (uint64_t)st.st_size - at;
        if (left < sizeof w || pread(fd, w, sizeof w, (off_t)at) != (ssize_t)sizeof w ||
            w[0] > ((uint64_t)1 << 40) || w[1] > ((uint64_t)1 << 40) ||
            left - sizeof w < 4 * (w[0] + 2 * w[1])) {
            free(p);
            close(fd);
            return errf(err, n, "checkpoint: %s: a model chunk's section is truncated", path);
        }
        float *grown = realloc(p, (floats + w[0]) * 4 + 4);
        if (!grown) {
            free(p);
            close(fd);
            return errf(err, n, "checkpoint: out of memory reading %s", path);
        }
        p = grown;
        if (lseek(fd, (off_t)(at + sizeof w), SEEK_SET) < 0 ||
            read_all(fd, p + floats, w[0] * 4) != 0) {
            free(p);
            close(fd);
            return errf(err, n, "checkpoint: cannot read %s", path);
        }
        floats += (size_t)w[0];
        at += sizeof w + 4 * (w[0] + 2 * w[1]);
    }
    close(fd);
    if (grid) {
        memset(grid, 0, sizeof *grid);
        grid->world = (int)h[H_WORLD];
        grid->rank = (int)h[H_RANK];
        grid->dp = (int)h[H_DP];
        grid->tp = (int)h[H_TP];
        grid->pp = (int)h[H_PP];
        grid->dp_rank = (int)h[H_DP_RANK];
        grid->tp_rank = (int)h[H_TP_RANK];
        grid->pp_rank = (int)h[H_PP_RANK];
        long denom = (long)grid->dp * grid->tp * grid->pp;
        grid->cp = denom > 0 ? (int)(grid->world / denom) : 1;
    }
    *params = p;
    *count = floats;
    return 0;
}

/* Writes this rank's shard atomically into the step directory sd. */
static int write_shard(const ckpt_rank_state *s, const char *sd, long long step, shard_info *out,
                       char *err, size_t n)
{
    char name[32], path[1200], tmp[1300];
    shard_name(name, sizeof name, s->grid->rank);
    snprintf(path, sizeof path, "%s/%s", sd, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unsigned char header[HEADER_BYTES];
    header_of(s, step, header);
    char *staging = malloc(STAGING_BYTES);
    if (!staging)
        return errf(err, n, "checkpoint: out of memory for the staging buffer");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(staging);
        return errf(err, n, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
    }
    int rc = 0;
    uint32_t crc = ckpt_crc32(0, header, sizeof header);
    if (write_all(fd, header, sizeof header) != 0)
        rc = errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
    int nseg = segment_count(s);
    segment *seg = malloc((size_t)nseg * sizeof *seg);
    if (!seg && rc == 0)
        rc = errf(err, n, "checkpoint: out of memory");
    if (seg)
        segments_of(s, seg);
    size_t total = shard_bytes_of(s) - HEADER_BYTES, done = 0;
    for (int k = 0; k < nseg && rc == 0; k++) {
        if (!seg[k].dev) { /* an extra chunk's description */
            crc = ckpt_crc32(crc, seg[k].words, sizeof seg[k].words);
            if (write_all(fd, seg[k].words, sizeof seg[k].words) != 0)
                rc = errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
            done += sizeof seg[k].words;
            continue;
        }
        for (size_t at = 0; at < seg[k].floats && rc == 0;) {
            size_t cnt = seg[k].floats - at;
            if (cnt > STAGING_BYTES / 4)
                cnt = STAGING_BYTES / 4;
            s->ops->copy_to_host(s->stream, staging, seg[k].dev + at, cnt * 4);
            if (s->ops->stream_synchronize(s->stream) != 0) {
                rc = errf(err, n, "checkpoint: copying to the host for %s failed: %s", tmp,
                          dev_last_error(s->dev));
                break;
            }
            crc = ckpt_crc32(crc, staging, cnt * 4);
            if (write_all(fd, staging, cnt * 4) != 0) {
                rc = errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
                break;
            }
            at += cnt;
            done += cnt * 4;
            if (2 * done >= total && debug_die_here(s->cfg, s->grid->rank, step, 1))
                debug_die(); /* testing: killed halfway through the shard */
        }
    }
    free(seg);
    free(staging);
    if (rc == 0 && fsync(fd) != 0)
        rc = errf(err, n, "checkpoint: fsync of %s failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = errf(err, n, "checkpoint: closing %s failed: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = errf(err, n, "checkpoint: renaming %s failed: %s", tmp, strerror(errno));
    if (rc == 0)
        rc = fsync_dir(sd, err, n);
    if (rc != 0) {
        unlink(tmp);
        return -1;
    }
    out->bytes = (long long)shard_bytes_of(s);
    out->crc = crc;
    return 0;
}

static int write_manifest(const ckpt_rank_state *s, const char *sd, long long step,
                          const shard_info *shards, char *err, size_t n)
{
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    char *text = manifest_text(s->cfg, step, shards);
    if (!text)
        return errf(err, n, "checkpoint: out of memory writing %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(text);
        return errf(err, n, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
    }
    int rc = 0;
    if (write_all(fd, text, strlen(text)) != 0)
        rc = errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
    free(text);
    if (rc == 0 && fsync(fd) != 0)
        rc = errf(err, n, "checkpoint: fsync of %s failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = errf(err, n, "checkpoint: closing %s failed: %s", tmp, strerror(errno));
    if (rc == 0 && debug_die_here(s->cfg, s->grid->rank, step, 2))
        debug_die(); /* testing: killed with every shard durable, before the manifest exists */
    if (rc == 0 && rename(tmp, path) != 0)
        rc = errf(err, n, "checkpoint: renaming %s failed: %s", tmp, strerror(errno));
    if (rc == 0)
        rc = fsync_dir(sd, err, n);
    if (rc != 0)
        unlink(tmp);
    return rc;
}

int ckpt_save(const ckpt_rank_state *s, int step, size_t *bytes_out, char *err, size_t n)
{
    const train_config *c = s->cfg;
    int world = s->grid->world, rank = s->grid->rank;
    if (world > MAX_WORLD)
        return errf(err, n, "checkpoint: at most %d ranks", MAX_WORLD);
    char sd[1024];
    step_dir_path(sd, sizeof sd, c->checkpoint_dir, step);
    shard_info mine = {0, 0};
    char my_err[768] = "";
    int rc = mkdir_p(sd, my_err, sizeof my_err);
    if (rc == 0)
        rc = write_shard(s, sd, step, &mine, my_err, sizeof my_err);
    /* every rank's [failed, bytes, crc] in its own row */
    double *rows = calloc((size_t)world * 3, sizeof(double));
    if (!rows)
        return errf(err, n, "checkpoint: out of memory");
    rows[3 * rank] = rc != 0;
    rows[3 * rank + 1] = (double)mine.bytes;
    rows[3 * rank + 2] = (double)mine.crc;
    if (world_sum(s, rows, (size_t)world * 3, err, n) != 0) {
        free(rows);
        return -1;
    }
    int failed = 0, first_failed = -1;
    shard_info shards[MAX_WORLD] = {{0, 0}};
    for (int r = 0; r < world; r++) {
        if (rows[3 * r] != 0 && first_failed < 0)
            first_failed = r;
        failed += rows[3 * r] != 0;
        shards[r].bytes = (long long)rows[3 * r + 1];
        shards[r].crc = (uint32_t)rows[3 * r + 2];
    }
    free(rows);
    if (rc != 0)
        return errf(err, n, "%s", my_err);
    if (failed)
        return errf(err, n, "checkpoint of step %d: %d rank(s) could not write their shard "
                            "(rank %d first; see its message)",
                    step, failed, first_failed);
    /* every shard is durable: rank 0 completes the checkpoint and prunes */
    double outcome = 0;
    if (rank == 0) {
        rc = write_manifest(s, sd, step, shards, my_err, sizeof my_err);
        if (rc == 0)
            rc = prune(c->checkpoint_dir, c->checkpoint_keep, debug_die_here(c, 0, step, 3),
                       my_err, sizeof my_err);
        outcome = rc != 0;
    }
    if (world_sum(s, &outcome, 1, err, n) != 0)
        return -1;
    if (rc != 0)
        return errf(err, n, "%s", my_err);
    if (outcome != 0)
        return errf(err, n, "checkpoint of step %d: rank 0 could not complete it (see its "
                            "message)",
                    step);
    if (bytes_out)
        *bytes_out = (size_t)mine.bytes;
    return 0;
}

/* ---- loading ------------------------------------------------------------------------------- */

static int read_shard(const ckpt_rank_state *s, const char *sd, const manifest *m, char *err,
                      size_t n)
{
    int rank = s->grid->rank;
    char name[32], path[1200];
    shard_name(name, sizeof name, rank);
    if (strcmp(m->file[rank], name) != 0)
        return errf(err, n, "checkpoint: %s/" MANIFEST_NAME ": rank %d's shard is named \"%s\", "
                            "expected \"%s\"",
                    sd, rank, m->file[rank], name);
    snprintf(path, sizeof path, "%s/%s", sd, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return errf(err, n, "checkpoint: cannot stat %s: %s", path, strerror(errno));
    }
    if ((long long)st.st_size != m->shard[rank].bytes) {
        close(fd);
        return errf(err, n,
                    "checkpoint: %s is %lld bytes, but the manifest says %lld (truncated or "
                    "replaced)",
                    path, (long long)st.st_size, m->shard[rank].bytes);
    }
    if ((size_t)st.st_size != shard_bytes_of(s)) {
        close(fd);
        return errf(err, n,
                    "checkpoint: %s is %lld bytes, but rank %d's parameters and optimizer state "
                    "take %zu: it was written by a different configuration",
                    path, (long long)st.st_size, rank, shard_bytes_of(s));
    }
    unsigned char header[HEADER_BYTES];
    char *staging = malloc(STAGING_BYTES);
    if (!staging) {
        close(fd);
        return errf(err, n, "checkpoint: out of memory for the staging buffer");
    }
    int rc = read_all(fd, header, sizeof header) == 0
                 ? 0
                 : errf(err, n, "checkpoint: cannot read %s", path);
    uint32_t crc = ckpt_crc32(0, header, sizeof header);
    int nseg = segment_count(s);
    segment *seg = malloc((size_t)nseg * sizeof *seg);
    if (!seg && rc == 0)
        rc = errf(err, n, "checkpoint: out of memory");
    if (seg)
        segments_of(s, seg);
    for (int k = 0; k < nseg && rc == 0; k++) {
        if (!seg[k].dev) { /* an extra chunk's description: must be this rank's */
            uint64_t got[CHUNK_WORDS];
            if (read_all(fd, got, sizeof got) != 0) {
                rc = errf(err, n, "checkpoint: cannot read %s", path);
                break;
            }
            crc = ckpt_crc32(crc, got, sizeof got);
            if (memcmp(got, seg[k].words, sizeof got) != 0)
                rc = errf(err, n,
                          "checkpoint: %s: model chunk %d holds %llu parameters and %llu optimizer "
                          "values at %llu, expected %llu, %llu at %llu for rank %d of this run",
                          path, 1 + (k - 3) / 4, (unsigned long long)got[0],
                          (unsigned long long)got[1], (unsigned long long)got[2],
                          (unsigned long long)seg[k].words[0], (unsigned long long)seg[k].words[1],
                          (unsigned long long)seg[k].words[2], rank);
            continue;
        }
        for (size_t at = 0; at < seg[k].floats;) {
            size_t cnt = seg[k].floats - at;
            if (cnt > STAGING_BYTES / 4)
                cnt = STAGING_BYTES / 4;
            if (read_all(fd, staging, cnt * 4) != 0) {
                rc = errf(err, n, "checkpoint: cannot read %s", path);
                break;
            }
            crc = ckpt_crc32(crc, staging, cnt * 4);
            s->ops->copy_to_device(s->stream, seg[k].dev + at, staging, cnt * 4);
            if (s->ops->stream_synchronize(s->stream) != 0) { /* before reusing staging */
                rc = errf(err, n, "checkpoint: copying %s to the device failed: %s", path,
                          dev_last_error(s->dev));
                break;
            }
            at += cnt;
        }
    }
    free(seg);
    free(staging);
    close(fd);
    if (rc != 0)
        return -1;
    if (crc != m->shard[rank].crc)
        return errf(err, n,
                    "checkpoint: %s is corrupted: its CRC32 is %08x, the manifest says %08x",
                    path, (unsigned)crc, (unsigned)m->shard[rank].crc);
    /* the bytes are those that were written: now the header can be trusted */
    unsigned char want[HEADER_BYTES];
    header_of(s, m->step, want);
    if (memcmp(header, CKPT_MAGIC, 8) != 0)
        return errf(err, n, "checkpoint: %s: not a stepscope checkpoint shard", path);
    uint64_t got_h[H_WORDS], want_h[H_WORDS];
    memcpy(got_h, header + 8, sizeof got_h);
    memcpy(want_h, want + 8, sizeof want_h);
    static const char *const field[H_WORDS] = {
        "format version", "step",    "seed",    "rank",   "world",     "dp",     "tp",
        "pp",             "dp rank", "tp rank", "pp rank", "zero",     "layers", "hidden",
        "heads",          "vocab",   "positions", "parameter count", "optimizer state size",
        "optimizer state offset"};
    for (int i = 0; i < H_WORDS; i++)
        if (got_h[i] != want_h[i])
            return errf(err, n,
                        "checkpoint: %s: its %s is %llu, expected %llu for rank %d of this run",
                        path, field[i], (unsigned long long)got_h[i],
                        (unsigned long long)want_h[i], rank);
    return 0;
}

int ckpt_load_latest(const ckpt_rank_state *s, int *step_out, char *note, size_t notelen,
                     char *err, size_t n)
{
    const train_config *c = s->cfg;
    int rank = s->grid->rank;
    if (note && notelen)
        note[0] = '\0';
    char my_err[768] = "";
    int rc = 0;
    /* rank 0 chooses; the others follow (step + 1 summed over the world; 0: none) */
    double chosen = 0;
    if (rank == 0) {
        long long step;
        int found = ckpt_latest_complete(c->checkpoint_dir, &step, my_err, sizeof my_err);
        if (found == 0)
            snprintf(my_err, sizeof my_err,
                     "--resume: no complete checkpoint in --checkpoint-dir %s", c->checkpoint_dir);
        chosen = found == 1 ? (double)step + 1 : 0;
    }
    if (world_sum(s, &chosen, 1, err, n) != 0)
        return -1;
    if (chosen < 1) {
        if (rank == 0)
            return errf(err, n, "%s", my_err);
        return errf(err, n, "checkpoint: rank 0 found no checkpoint to resume from");
    }
    long long step = (long long)chosen - 1;
    char sd[1024], mpath[1200];
    step_dir_path(sd, sizeof sd, c->checkpoint_dir, step);
    snprintf(mpath, sizeof mpath, "%s/" MANIFEST_NAME, sd);
    manifest *m = malloc(sizeof *m);
    if (!m) {
        snprintf(my_err, sizeof my_err, "checkpoint: out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = manifest_read(mpath, m, my_err, sizeof my_err);
    if (rc == 0 && m->step != step)
        rc = errf(my_err, sizeof my_err, "checkpoint: %s says step %lld, its directory %lld",
                  mpath, m->step, step);
    if (rc == 0)
        rc = manifest_compare(m, c, 1, mpath, my_err, sizeof my_err);
    if (rc == 0 && step > 2147483647LL)
        rc = errf(my_err, sizeof my_err, "checkpoint: %s: step %lld is out of range", mpath, step);
    if (rc == 0)
        rc = read_shard(s, sd, m, my_err, sizeof my_err);
    if (rc == 0 && note && notelen &&
        (m->steps != c->steps || m->warmup != c->warmup || m->lr != c->lr ||
         m->min_lr_ratio != c->min_lr_ratio))
        snprintf(note, notelen,
                 "the learning-rate schedule differs from the checkpointed run's (--steps %lld, "
                 "--warmup %lld, --lr %g, --min-lr-ratio %g); it follows this run's options from "
                 "step %lld",
                 m->steps, m->warmup, m->lr, m->min_lr_ratio, step);
    free(m);
    /* every rank's failure flag in its own slot */
    int world = s->grid->world;
    double *failed = calloc((size_t)world, sizeof(double));
    if (!failed)
        return errf(err, n, "checkpoint: out of memory");
    failed[rank] = rc != 0;
    if (world_sum(s, failed, (size_t)world, err, n) != 0) {
        free(failed);
        return -1;
    }
    int first = -1;
    for (int r = world - 1; r >= 0; r--)
        if (failed[r] != 0)
            first = r;
    free(failed);
    if (rc != 0)
        return errf(err, n, "%s", my_err);
    if (first >= 0)
        return errf(err, n, "checkpoint: rank %d could not resume (see its message)", first);
    *step_out = (int)step;
    return 0;
}
