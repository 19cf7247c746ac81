/*
 * view_http.c — the read-only HTTP/1.1 server behind `stepscope view`.
 *
 * How it works: one listening socket (127.0.0.1 unless --bind says otherwise);
 * each connection is served by its own detached thread (at most
 * VIEW_MAX_CONNECTIONS at once; beyond that new connections wait in the listen
 * queue), one request per connection (Connection: close), with send and receive
 * timeouts so a silent client holds only its own thread. A browser loading the
 * viewer opens several connections at once, and a slow download of a big trace
 * no longer stalls the page's other requests. Everything the threads share (the
 * runs, the embedded assets) is read-only once serving starts. Only GET and HEAD
 * are answered (405 otherwise). Files are sent with `Accept-Ranges: bytes`; a
 * single `Range: bytes=A-B` (or `A-`, `-N`) gets 206 with Content-Range, an
 * unsatisfiable one 416, and several ranges in one header the whole file (200),
 * which RFC 9110 allows. Routes:
 *   /, /index.html, /css/..., /js/...   the viewer's embedded files
 *   /api/runs                           the runs and their files, as JSON
 *   /run/<id>/<name>                    a file of run <id> ("a", or "b" for --compare)
 * Everything else is 404; a path that fails view_path_decode is 400; a run file
 * that resolves outside its run is 404 (nothing says whether it exists). When bound
 * to loopback, a Host header naming another host is refused (403), which defeats
 * DNS-rebinding pages. Files are streamed with read/write; large traces never sit
 * in memory. SIGINT/SIGTERM stop the loop.
 */
#include "view.h"
#include "stepscope_viewer_assets.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Connections served at the same time; more wait in the kernel's listen queue. */
#define VIEW_MAX_CONNECTIONS 32

static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int send_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* `extra` is further header lines, each ending in CRLF ("" for none). */
static void send_head_extra(int fd, int code, const char *reason, const char *type,
                            unsigned long long length, const char *extra) {
  char h[768];
  int n = snprintf(h, sizeof h,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
                   "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                   "%sConnection: close\r\n\r\n",
                   code, reason, type, length, extra);
  if (n > 0 && (size_t)n < sizeof h) send_all(fd, h, (size_t)n);
}

static void send_head(int fd, int code, const char *reason, const char *type, unsigned long long length) {
  send_head_extra(fd, code, reason, type, length, "");
}

static void send_error(int fd, int code, const char *reason, int head_only) {
  char body[128];
  int n = snprintf(body, sizeof body, "%d %s\n", code, reason);
  send_head(fd, code, reason, "text/plain; charset=utf-8", (unsigned long long)n);
  if (!head_only) send_all(fd, body, (size_t)n);
}

static void send_memory(int fd, const char *type, const void *data, size_t len, int head_only) {
  send_head(fd, 200, "OK", type, len);
  if (!head_only) send_all(fd, data, len);
}

static const char *type_of(const char *name) {
  size_t l = strlen(name);
  if (l > 5 && strcmp(name + l - 5, ".json") == 0) return "application/json";
  if (l > 3 && strcmp(name + l - 3, ".gz") == 0) return "application/gzip";
  return "application/octet-stream";
}

/* The value of header `name` (case-insensitive) in the request head, copied
 * into out; 0 if found, -1 if absent or too long. */
static int header_value(const char *head, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  const char *h = head;
  while ((h = strchr(h, '\n')) != NULL) {
    h++;
    if (strncasecmp(h, name, nl) != 0 || h[nl] != ':') continue;
    h += nl + 1;
    while (*h == ' ' || *h == '\t') h++;
    size_t len = strcspn(h, "\r\n");
    while (len && (h[len - 1] == ' ' || h[len - 1] == '\t')) len--;
    if (len >= cap) return -1;
    memcpy(out, h, len);
    out[len] = '\0';
    return 0;
  }
  return -1;
}

enum { RANGE_NONE, RANGE_ONE, RANGE_UNSATISFIABLE };

/* Parses a Range header value against a file of `size` bytes: one byte range
 * "bytes=A-B", "bytes=A-" or "bytes=-N" gives RANGE_ONE with [*first, *last];
 * a range starting beyond the end gives RANGE_UNSATISFIABLE; anything else
 * (other units, several ranges, malformed) gives RANGE_NONE: the whole file. */
static int parse_range(const char *v, unsigned long long size, unsigned long long *first,
                       unsigned long long *last) {
  if (strncasecmp(v, "bytes=", 6) != 0) return RANGE_NONE;
  v += 6;
  if (strchr(v, ',')) return RANGE_NONE;
  const char *dash = strchr(v, '-');
  if (!dash) return RANGE_NONE;
  char *end;
  if (dash == v) { /* suffix: the last N bytes */
    if (dash[1] < '0' || dash[1] > '9') return RANGE_NONE;
    errno = 0;
    unsigned long long n = strtoull(dash + 1, &end, 10);
    if (*end || errno) return RANGE_NONE;
    if (n == 0 || size == 0) return RANGE_UNSATISFIABLE;
    *first = n >= size ? 0 : size - n;
    *last = size - 1;
    return RANGE_ONE;
  }
  if (*v < '0' || *v > '9') return RANGE_NONE;
  errno = 0;
  unsigned long long a = strtoull(v, &end, 10);
  if (end != dash || errno) return RANGE_NONE;
  unsigned long long b = size ? size - 1 : 0;
  if (dash[1]) {
    if (dash[1] < '0' || dash[1] > '9') return RANGE_NONE;
    errno = 0;
    b = strtoull(dash + 1, &end, 10);
    if (*end || errno || b < a) return RANGE_NONE;
    if (size && b > size - 1) b = size - 1;
  }
  if (a >= size) return RANGE_UNSATISFIABLE;
  *first = a;
  *last = b;
  return RANGE_ONE;
}

static void send_file(int fd, const char *path, const char *name, const char *req_head, int head_only) {
  int f = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (f >= 0) close(f);
    send_error(fd, 404, "Not Found", head_only);
    return;
  }
  unsigned long long size = (unsigned long long)st.st_size, first = 0, last = size ? size - 1 : 0;
  char range[256], extra[160];
  int kind = header_value(req_head, "Range", range, sizeof range) == 0
                 ? parse_range(range, size, &first, &last)
                 : RANGE_NONE;
  if (kind == RANGE_UNSATISFIABLE) {
    snprintf(extra, sizeof extra, "Accept-Ranges: bytes\r\nContent-Range: bytes */%llu\r\n", size);
    const char *body = "416 Range Not Satisfiable\n";
    send_head_extra(fd, 416, "Range Not Satisfiable", "text/plain; charset=utf-8", strlen(body), extra);
    if (!head_only) send_all(fd, body, strlen(body));
    close(f);
    return;
  }
  unsigned long long length = size;
  if (kind == RANGE_ONE) {
    length = last - first + 1;
    snprintf(extra, sizeof extra, "Accept-Ranges: bytes\r\nContent-Range: bytes %llu-%llu/%llu\r\n",
             first, last, size);
    send_head_extra(fd, 206, "Partial Content", type_of(name), length, extra);
  } else {
    send_head_extra(fd, 200, "OK", type_of(name), length, "Accept-Ranges: bytes\r\n");
  }
  if (!head_only) {
    /* Per call (threads serve connections concurrently), on the heap: 64 KiB
     * is too much for a thread stack we do not size ourselves. */
    char *buf = malloc(1 << 16);
    off_t at = (off_t)first;
    while (buf && length) {
      size_t want = length < (1u << 16) ? (size_t)length : (1u << 16);
      ssize_t r = pread(f, buf, want, at);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || send_all(fd, buf, (size_t)r) != 0) break;
      at += r;
      length -= (unsigned long long)r;
    }
    free(buf);
  }
  close(f);
}

/* Reads the request head (up to the blank line). Returns its length or -1. */
static int read_head(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    n += (size_t)r;
    buf[n] = '\0';
    if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n")) return (int)n;
  }
  return -1;
}

/* The Host header's host part is loopback (or there is no Host header). */
static int host_is_loopback(const char *head) {
  const char *h = head;
  while ((h = strchr(h, '\n')) != NULL) {
    h++;
    if (strncasecmp(h, "Host:", 5) != 0) continue;
    h += 5;
    while (*h == ' ' || *h == '\t') h++;
    size_t len = strcspn(h, "\r\n");
    char host[256];
    if (len >= sizeof host) return 0;
    memcpy(host, h, len);
    host[len] = '\0';
    char *end = host[0] == '[' ? strchr(host, ']') : strchr(host, ':');
    if (end && host[0] == '[') end++;
    if (end) *end = '\0';
    return strcmp(host, "127.0.0.1") == 0 || strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0;
  }
  return 1;
}

static void handle(int fd, view_run *runs, int nruns, int loopback) {
  char head[8192], method[16], target[4096], version[16], path[4096];
  if (read_head(fd, head, sizeof head) < 0) return;
  if (sscanf(head, "%15s %4095s %15s", method, target, version) != 3 || strncmp(version, "HTTP/1.", 7) != 0) {
    send_error(fd, 400, "Bad Request", 0);
    return;
  }
  int head_only = strcmp(method, "HEAD") == 0;
  if (!head_only && strcmp(method, "GET") != 0) {
    send_error(fd, 405, "Method Not Allowed", 0);
    return;
  }
  if (loopback && !host_is_loopback(head)) {
    send_error(fd, 403, "Forbidden", head_only);
    return;
  }
  if (view_path_decode(target, path, sizeof path) != 0) {
    send_error(fd, 400, "Bad Request", head_only);
    return;
  }
  if (strcmp(path, "/") == 0) snprintf(path, sizeof path, "/index.html");
  if (strncmp(path, "/run/", 5) == 0) {
    const char *id = path + 5, *slash = strchr(id, '/');
    if (slash && strchr(slash + 1, '/') == NULL) {
      for (int i = 0; i < nruns; i++) {
        size_t idl = strlen(runs[i].id);
        if ((size_t)(slash - id) != idl || strncmp(id, runs[i].id, idl) != 0) continue;
        char resolved[PATH_MAX];
        if (view_run_file(&runs[i], slash + 1, resolved, sizeof resolved) == 0) {
          send_file(fd, resolved, slash + 1, head, head_only);
          return;
        }
      }
    }
    send_error(fd, 404, "Not Found", head_only);
    return;
  }
  if (strcmp(path, "/api/runs") == 0) {
    char *json = view_runs_json(runs, nruns, 0);
    if (!json) { send_error(fd, 500, "Internal Server Error", head_only); return; }
    send_memory(fd, "application/json", json, strlen(json), head_only);
    free(json);
    return;
  }
  const stepscope_viewer_asset *a = stepscope_viewer_asset_find(path + 1);
  if (a) {
    send_memory(fd, a->content_type, a->data, a->size, head_only);
    return;
  }
  send_error(fd, 404, "Not Found", head_only);
}

typedef struct connection {
  int fd;
  view_run *runs;
  int nruns, loopback;
} connection;

static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t active_changed = PTHREAD_COND_INITIALIZER;
static int active_connections = 0;

static void serve_connection(connection *c) {
  struct timeval tv = {5, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  handle(c->fd, c->runs, c->nruns, c->loopback);
  shutdown(c->fd, SHUT_WR);
  close(c->fd);
}

static void *connection_thread(void *arg) {
  connection *c = arg;
  serve_connection(c);
  free(c);
  pthread_mutex_lock(&active_lock);
  active_connections--;
  pthread_cond_signal(&active_changed);
  pthread_mutex_unlock(&active_lock);
  return NULL;
}

/* Serves the accepted connection on a new thread once fewer than
 * VIEW_MAX_CONNECTIONS are active; on the calling thread if no thread can be made. */
static void dispatch(int fd, view_run *runs, int nruns, int loopback) {
  connection local = {fd, runs, nruns, loopback};
  connection *c = malloc(sizeof *c);
  if (!c) {
    serve_connection(&local);
    return;
  }
  *c = local;
  pthread_mutex_lock(&active_lock);
  while (active_connections >= VIEW_MAX_CONNECTIONS && !stop_requested)
    pthread_cond_wait(&active_changed, &active_lock);
  active_connections++;
  pthread_mutex_unlock(&active_lock);
  pthread_attr_t attr;
  pthread_t t;
  int made = pthread_attr_init(&attr) == 0;
  if (made) {
    /* The new thread blocks SIGINT/SIGTERM so that they reach the accepting
     * thread and interrupt accept(). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    made = pthread_create(&t, &attr, connection_thread, c) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
  }
  if (!made) {
    serve_connection(c);
    free(c);
    pthread_mutex_lock(&active_lock);
    active_connections--;
    pthread_mutex_unlock(&active_lock);
  }
}

/* Waits (up to ~6 s: the sockets' timeouts bound every transfer step) for the
 * connection threads to finish before the runs they read are closed. */
static void wait_for_connections(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 6;
  pthread_mutex_lock(&active_lock);
  while (active_connections > 0)
    if (pthread_cond_timedwait(&active_changed, &active_lock, &until) != 0) break;
  pthread_mutex_unlock(&active_lock);
}

int view_serve(view_run *runs, int nruns, const char *bind_addr, int port, FILE *out) {
  struct addrinfo hints, *ai = NULL;
  char portstr[16];
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(bind_addr, portstr, &hints, &ai);
  if (rc != 0) {
    fprintf(stderr, "stepscope view: --bind %s: %s (give a numeric IPv4 or IPv6 address)\n", bind_addr, gai_strerror(rc));
    return 1;
  }
  int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (ls >= 0) setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) != 0 || listen(ls, 64) != 0) {
    fprintf(stderr, "stepscope view: cannot listen on %s port %d: %s\n", bind_addr, port, strerror(errno));
    if (ls >= 0) close(ls);
    freeaddrinfo(ai);
    return 1;
  }
  int loopback = 0;
  if (ai->ai_family == AF_INET)
    loopback = (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) == 127;
  else if (ai->ai_family == AF_INET6)
    loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
  int v6 = ai->ai_family == AF_INET6;
  freeaddrinfo(ai);

  struct sockaddr_storage sa;
  socklen_t sl = sizeof sa;
  getsockname(ls, (struct sockaddr *)&sa, &sl);
  int actual = ntohs(v6 ? ((struct sockaddr_in6 *)&sa)->sin6_port : ((struct sockaddr_in *)&sa)->sin_port);
  fprintf(out, "stepscope view: serving %s%s%s at http://%s%s%s:%d/\n", runs[0].name, nruns > 1 ? " vs " : "",
          nruns > 1 ? runs[1].name : "", v6 ? "[" : "", bind_addr, v6 ? "]" : "", actual);
  for (int i = 0; i < nruns; i++) {
    if (runs[i].missing[0]) fprintf(out, "stepscope view: %s: missing %s\n", runs[i].name, runs[i].missing);
    if (runs[i].notes[0]) fprintf(out, "stepscope view: %s: %s\n", runs[i].name, runs[i].notes);
  }
  if (!loopback) fprintf(out, "stepscope view: warning: listening beyond this machine (%s); the run's files are readable by anyone who can reach it\n", bind_addr);
  fprintf(out, "stepscope view: press Ctrl+C to stop\n");
  fflush(out);

  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = on_signal;
  sigaction(SIGINT, &act, NULL);
  sigaction(SIGTERM, &act, NULL);
  signal(SIGPIPE, SIG_IGN);

  while (!stop_requested) {
    int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fprintf(stderr, "stepscope view: accept: %s\n", strerror(errno));
      break;
    }
    dispatch(fd, runs, nruns, loopback);
  }
  close(ls);
  wait_for_connections();
  return 0;
}
