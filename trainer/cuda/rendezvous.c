/*
 * rendezvous.c — launcher environment detection and the file/TCP key-value store
 * used to exchange NCCL unique ids (see rendezvous.h for the protocol).
 */
#include "rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zalloc.h"

#define RDZV_MAX_KEY   200
#define RDZV_MAX_VALUE 4096
#define RDZV_MAX_KEYS  1024

/* ---- environment ------------------------------------------------------------------- */

static int env_int(const char *name, int *out) {
  const char *v = getenv(name);
  if (!v || !v[0]) return 0;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end) return 0;
  *out = (int)x;
  return 1;
}

/* The launchers recognized, tried in this order, by the variables they set. */
static const struct launcher_vars {
  const char *source, *rank, *world, *local_rank, *local_world;
} launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

int rdzv_env_detect(rdzv_env *e) {
  memset(e, 0, sizeof *e);
  e->world = 1;
  e->local_world = 1;
  e->local_rank = -1;
  e->local_world = -1;
  const struct launcher_vars *l = NULL;
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !l; i++)
    if (env_int(launchers[i].rank, &e->rank) && env_int(launchers[i].world, &e->world))
      l = &launchers[i];
  if (l) {
    snprintf(e->source, sizeof e->source, "%s", l->source);
    env_int(l->local_rank, &e->local_rank);
    env_int(l->local_world, &e->local_world);
  } else {
    snprintf(e->source, sizeof e->source, "none");
    e->rank = 0;
    e->world = 1;
  }
  int found = l != NULL, torchrun_style = l == &launchers[0];
  if (e->local_rank < 0) e->local_rank = e->rank;
  e->local_world_known = e->local_world > 0 || torchrun_style || !found;
  if (e->local_world <= 0) e->local_world = e->world;
  const char *addr = getenv("MASTER_ADDR");
  snprintf(e->master_addr, sizeof e->master_addr, "%s", addr && addr[0] ? addr : "127.0.0.1");
  if (!env_int("MASTER_PORT", &e->master_port)) e->master_port = 29500;
  return found ? 0 : -1;
}

/* ---- the store ------------------------------------------------------------------------ */

typedef struct kv {
  char key[RDZV_MAX_KEY + 1];
  unsigned char *value;
  size_t len;
} kv;

struct rdzv_store {
  int is_tcp;
  double timeout_s;
  char dir[512];
  /* tcp */
  char addr[256];
  int port;
  int listen_fd;
  pthread_t server;
  int serving;
  volatile int stop;
  pthread_mutex_t mu;
  kv *keys;
  int nkeys;
  /* file: the keys this process set, removed at close (by then every reader has them) */
  char (*written)[RDZV_MAX_KEY + 1];
  int nwritten;
};

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int key_ok(const char *key) {
  size_t n = strlen(key);
  if (n == 0 || n > RDZV_MAX_KEY) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return 0;
  }
  return key[0] != '.';
}

rdzv_store *rdzv_file_open(const char *dir, double timeout_s, char *err, size_t errlen) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "rendezvous directory %s: %s", dir, strerror(errno));
    return NULL;
  }
  rdzv_store *s = zalloc(sizeof *s, err, errlen);
  if (!s) return NULL;
  snprintf(s->dir, sizeof s->dir, "%s", dir);
  s->timeout_s = timeout_s;
  s->listen_fd = -1;
  return s;
}

static int file_set(rdzv_store *s, const char *key, const void *value, size_t len, char *err,
                    size_t errlen) {
  char tmp[800], path[800];
  snprintf(path, sizeof path, "%s/%s", s->dir, key);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", s->dir, key, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(err, errlen, "rendezvous file %s: %s", tmp, strerror(errno));
    return -1;
  }
  int ok = fwrite(value, 1, len, f) == len;
  ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, errlen, "rendezvous file %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  if (!s->written) s->written = calloc(RDZV_MAX_KEYS, sizeof *s->written);
  if (s->written && s->nwritten < RDZV_MAX_KEYS)
    snprintf(s->written[s->nwritten++], RDZV_MAX_KEY + 1, "%s", key);
  return 0;
}

static int file_get(rdzv_store *s, const char *key, void *value, size_t cap, size_t *len, char *err,
                    size_t errlen) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", s->dir, key);
  double until = mono_s() + s->timeout_s;
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(value, 1, cap, f);
      int extra = fgetc(f) != EOF;
      fclose(f);
      if (extra) {
        snprintf(err, errlen, "rendezvous file %s: larger than %zu bytes", path, cap);
        return -1;
      }
      *len = n;
      return 0;
    }
    if (mono_s() > until) {
      snprintf(err, errlen, "rendezvous: key %s did not appear in %s within %.0f s", key, s->dir,
               s->timeout_s);
      return -1;
    }
    sleep_ms(5);
  }
}

/* ---- TCP ----------------------------------------------------------------------------- */

/* Counts what a send or recv moved into *done: -1 when it failed or the peer closed, 0 when
 * it was interrupted before moving anything (try again), else 1. */
static int moved(ssize_t k, size_t *done) {
  if (k < 0 && errno == EINTR) return 0;
  if (k <= 0) return -1;
  *done += (size_t)k;
  return 1;
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  for (size_t done = 0; done < n;)
    if (moved(send(fd, p + done, n - done, MSG_NOSIGNAL), &done) < 0) return -1;
  return 0;
}

/* Reads exactly n bytes, waiting at most until `until` (monotonic seconds). */
static int read_all(int fd, void *buf, size_t n, double until) {
  char *p = buf;
  for (size_t done = 0; done < n;) {
    int ms = (int)((until - mono_s()) * 1000);
    if (ms <= 0) return -1;
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, ms > 1000 ? 1000 : ms) <= 0) continue; /* interrupted or nothing yet */
    if (moved(recv(fd, p + done, n - done, 0), &done) < 0) return -1;
  }
  return 0;
}

/* Reads a header line "<text>\n" of at most cap-1 characters. */
static int read_line(int fd, char *line, size_t cap, double until) {
  size_t n = 0;
  while (n + 1 < cap) {
    if (read_all(fd, line + n, 1, until) != 0) return -1;
    if (line[n] == '\n') {
      line[n] = 0;
      return 0;
    }
    n++;
  }
  return -1;
}

static kv *find_key(rdzv_store *s, const char *key) {
  for (int i = 0; i < s->nkeys; i++)
    if (!strcmp(s->keys[i].key, key)) return &s->keys[i];
  return NULL;
}

/* Serves one connection: one request, one answer. */
static void serve_one(rdzv_store *s, int fd) {
  char line[64], key[RDZV_MAX_KEY + 1];
  double until = mono_s() + 10.0;
  if (read_line(fd, line, sizeof line, until) != 0) return;
  char op = 0;
  int klen = 0, vlen = 0;
  int fields = sscanf(line, "%c %d %d", &op, &klen, &vlen);
  if (fields < 2 || klen <= 0 || klen > RDZV_MAX_KEY || vlen < 0 || vlen > RDZV_MAX_VALUE) return;
  if (read_all(fd, key, (size_t)klen, until) != 0) return;
  key[klen] = 0;
  if (op == 'S' && fields == 3) {
    unsigned char *val = malloc((size_t)vlen + 1);
    if (!val || read_all(fd, val, (size_t)vlen, until) != 0) {
      free(val);
      return;
    }
    pthread_mutex_lock(&s->mu);
    kv *k = find_key(s, key);
    if (!k && s->nkeys < RDZV_MAX_KEYS) {
      k = &s->keys[s->nkeys++];
      snprintf(k->key, sizeof k->key, "%s", key);
    }
    if (k) {
      free(k->value);
      k->value = val;
      k->len = (size_t)vlen;
      val = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(val);
    write_all(fd, "0\n", 2);
  } else if (op == 'G') {
    /* answer now if set; the client retries a "-1" after a short pause */
    pthread_mutex_lock(&s->mu);
    kv *k = find_key(s, key);
    char hdr[32];
    if (k) {
      int n = snprintf(hdr, sizeof hdr, "%zu\n", k->len);
      write_all(fd, hdr, (size_t)n);
      write_all(fd, k->value, k->len);
    } else {
      write_all(fd, "-1\n", 3);
    }
    pthread_mutex_unlock(&s->mu);
  }
}

static void *server_main(void *arg) {
  rdzv_store *s = arg;
  while (!s->stop) {
    struct pollfd pfd = {s->listen_fd, POLLIN, 0};
    int r = poll(&pfd, 1, 100);
    if (r <= 0) continue;
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) continue;
    serve_one(s, fd);
    close(fd);
  }
  return NULL;
}

static int tcp_connect(const char *addr, int port, double until, char *err, size_t errlen) {
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  for (;;) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(addr, portstr, &hints, &res);
    if (gai == 0) {
      for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          freeaddrinfo(res);
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          return fd;
        }
        close(fd);
      }
      freeaddrinfo(res);
    }
    if (mono_s() > until) {
      snprintf(err, errlen, "rendezvous: cannot reach the TCP store at %s:%d (%s)", addr, port,
               gai ? gai_strerror(gai) : strerror(errno));
      return -1;
    }
    sleep_ms(50);
  }
}

rdzv_store *rdzv_tcp_open(const char *addr, int port, int serve, double timeout_s, char *err,
                          size_t errlen) {
  if (port <= 0 || port > 65535) {
    snprintf(err, errlen, "rendezvous: bad TCP port %d", port);
    return NULL;
  }
  rdzv_store *s = zalloc(sizeof *s, err, errlen);
  if (!s) return NULL;
  s->is_tcp = 1;
  s->timeout_s = timeout_s;
  s->listen_fd = -1;
  snprintf(s->addr, sizeof s->addr, "%s", addr && addr[0] ? addr : "127.0.0.1");
  s->port = port;
  pthread_mutex_init(&s->mu, NULL);
  if (serve) {
    s->keys = calloc(RDZV_MAX_KEYS, sizeof(kv));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (!s->keys || fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0) {
      snprintf(err, errlen, "rendezvous: cannot listen on TCP port %d: %s", port, strerror(errno));
      if (fd >= 0) close(fd);
      free(s->keys);
      pthread_mutex_destroy(&s->mu);
      free(s);
      return NULL;
    }
    s->listen_fd = fd;
    if (pthread_create(&s->server, NULL, server_main, s) != 0) {
      snprintf(err, errlen, "rendezvous: cannot start the TCP store thread");
      close(fd);
      free(s->keys);
      pthread_mutex_destroy(&s->mu);
      free(s);
      return NULL;
    }
    s->serving = 1;
  }
  return s;
}

static int tcp_request(rdzv_store *s, const char *hdr, size_t hdrlen, const char *key,
                       const void *value, size_t vlen, char *reply, size_t cap, long *rlen,
                       char *err, size_t errlen) {
  double until = mono_s() + s->timeout_s;
  int fd = tcp_connect(s->addr, s->port, until, err, errlen);
  if (fd < 0) return -1;
  int rc = -1;
  char line[32];
  if (write_all(fd, hdr, hdrlen) == 0 && write_all(fd, key, strlen(key)) == 0 &&
      (!vlen || write_all(fd, value, vlen) == 0) && read_line(fd, line, sizeof line, until) == 0) {
    *rlen = strtol(line, NULL, 10);
    rc = 0;
    if (*rlen > 0) {
      if ((size_t)*rlen > cap) {
        snprintf(err, errlen, "rendezvous: value of %s is larger than %zu bytes", key, cap);
        rc = -1;
      } else if (read_all(fd, reply, (size_t)*rlen, until) != 0) {
        rc = -1;
      }
    }
  }
  if (rc != 0 && !err[0])
    snprintf(err, errlen, "rendezvous: TCP store %s:%d dropped the request for %s", s->addr,
             s->port, key);
  close(fd);
  return rc;
}

int rdzv_set(rdzv_store *s, const char *key, const void *value, size_t len, char *err,
             size_t errlen) {
  err[0] = 0;
  if (!key_ok(key) || len > RDZV_MAX_VALUE) {
    snprintf(err, errlen, "rendezvous: bad key '%s' or value of %zu bytes", key, len);
    return -1;
  }
  if (!s->is_tcp) return file_set(s, key, value, len, err, errlen);
  char hdr[64];
  int n = snprintf(hdr, sizeof hdr, "S %zu %zu\n", strlen(key), len);
  long rlen = 0;
  return tcp_request(s, hdr, (size_t)n, key, value, len, NULL, 0, &rlen, err, errlen);
}

int rdzv_get(rdzv_store *s, const char *key, void *value, size_t cap, size_t *len, char *err,
             size_t errlen) {
  err[0] = 0;
  if (!key_ok(key)) {
    snprintf(err, errlen, "rendezvous: bad key '%s'", key);
    return -1;
  }
  if (!s->is_tcp) return file_get(s, key, value, cap, len, err, errlen);
  char hdr[64];
  int n = snprintf(hdr, sizeof hdr, "G %zu\n", strlen(key));
  double until = mono_s() + s->timeout_s;
  for (;;) {
    long rlen = -1;
    if (tcp_request(s, hdr, (size_t)n, key, NULL, 0, value, cap, &rlen, err, errlen) != 0)
      return -1;
    if (rlen >= 0) {
      *len = (size_t)rlen;
      return 0;
    }
    if (mono_s() > until) {
      snprintf(err, errlen, "rendezvous: key %s was not set on %s:%d within %.0f s", key, s->addr,
               s->port, s->timeout_s);
      return -1;
    }
    sleep_ms(20);
  }
}

rdzv_store *rdzv_open_from_env(const rdzv_env *env, double timeout_s, char *err, size_t errlen) {
  const char *spec = getenv("STEPSCOPE_RDZV");
  if (spec && !strncmp(spec, "file://", 7)) return rdzv_file_open(spec + 7, timeout_s, err, errlen);
  if (spec && !strncmp(spec, "tcp://", 6)) {
    char host[256];
    snprintf(host, sizeof host, "%s", spec + 6);
    char *colon = strrchr(host, ':');
    if (!colon) {
      snprintf(err, errlen, "STEPSCOPE_RDZV=%s: expected tcp://host:port", spec);
      return NULL;
    }
    *colon = 0;
    return rdzv_tcp_open(host, atoi(colon + 1), env->rank == 0, timeout_s, err, errlen);
  }
  if (spec && spec[0]) {
    snprintf(err, errlen, "STEPSCOPE_RDZV=%s: expected file:///dir or tcp://host:port", spec);
    return NULL;
  }
  return rdzv_tcp_open(env->master_addr, env->master_port + 1, env->rank == 0, timeout_s, err,
                       errlen);
}

void rdzv_close(rdzv_store *s) {
  if (!s) return;
  if (s->serving) {
    /* Let the others fetch what they still need: serve until asked to stop. */
    s->stop = 1;
    pthread_join(s->server, NULL);
    close(s->listen_fd);
  }
  for (int i = 0; s->keys && i < s->nkeys; i++)
    free(s->keys[i].value);
  if (!s->is_tcp) {
    char path[800];
    for (int i = 0; i < s->nwritten; i++) {
      snprintf(path, sizeof path, "%s/%s", s->dir, s->written[i]);
      unlink(path);
    }
    rmdir(s->dir); /* fails while other ranks' keys remain: the last one removes it */
    free(s->written);
  }
  free(s->keys);
  if (s->is_tcp) pthread_mutex_destroy(&s->mu);
  free(s);
}
