/*
 * view_http.c — the read-only HTTP/1.1 server behind `stepscope view`.
 *
 * How it works: one listening socket (127.0.0.1 unless --bind says otherwise).
 * The accepting thread reads every request head itself, from non-blocking
 * sockets in one poll() loop: each head must arrive whole within
 * VIEW_HEAD_DEADLINE_S of the connection (408 otherwise), however its bytes
 * trickle in, and at most VIEW_MAX_PENDING connections wait for their head;
 * beyond that the oldest waiting one is closed. So clients that send a byte
 * every few seconds (slowloris) hold no thread and can never keep a new
 * client out. A complete head goes to its own detached thread (at most
 * VIEW_MAX_CONNECTIONS at once; complete heads beyond that wait in the loop),
 * one request per connection (Connection: close), with a send timeout. A
 * browser loading the viewer opens several connections at once, and a slow
 * download of a big trace does not stall the page's other requests.
 * Everything the threads share (the runs, the embedded assets, the token) is
 * read-only once serving starts. Only GET and HEAD are answered (405
 * otherwise).
 *
 * Access: a random token (128 bits from getrandom, in hex) is the first
 * segment of every path: the printed URL is http://127.0.0.1:P/t/<token>/,
 * the viewer asks for everything by relative URL (js/app.js, api/runs,
 * run/a/trace.json), so each request the page makes carries the token, and a
 * request whose path does not start with /t/<token>/ is refused (403); /t/<token>
 * without its slash is redirected to it. No cookie is set: a browser sends a
 * cookie of 127.0.0.1 to every port of 127.0.0.1 (cookies ignore ports, and
 * SameSite counts all loopback ports as one site), so a cookie would hand the
 * token to any other local server the browser visits; a path is sent only to
 * this server, and Referrer-Policy: no-referrer keeps it out of the Referer of
 * any link or navigation away. So other local users, who can reach the port but
 * not read the terminal, get nothing. Only the files the viewer needs are served:
 * its embedded assets, the run listing, and each run's export and report (by
 * their exact names), never any other file of the run directory.
 *
 * Heads are refused early: a NUL byte at once (400), a head over
 * VIEW_HEAD_MAX bytes with 431, folded header lines (obs-fold) and a missing,
 * repeated or empty Host header with 400. Every response carries a
 * Content-Security-Policy (scripts, workers and connections only from this
 * origin, blob: workers for the viewer's parser, frame-ancestors 'none') and
 * X-Frame-Options: DENY; the "open in Perfetto" button uses window.open and
 * postMessage, which the policy does not restrict. Files are sent with `Accept-Ranges: bytes`; a
 * single `Range: bytes=A-B` (or `A-`, `-N`) gets 206 with Content-Range, an
 * unsatisfiable one 416, and several ranges in one header the whole file (200),
 * which RFC 9110 allows. Routes, each under /t/<token>:
 *   /, /index.html, /css/..., /js/...   the viewer's embedded files
 *   /api/runs                           the runs and their files, as JSON
 *   /run/<id>/<name>                    a file of run <id> ("a", or "b" for --compare)
 * Everything else is 404; a path that fails view_path_decode is 400; a run file
 * that resolves outside its run is 404 (nothing says whether it exists). When bound
 * to loopback, a Host header naming another host is refused (403), which defeats
 * DNS-rebinding pages. Files are streamed with read/write; large traces never sit
 * in memory (SIGPIPE is ignored while serving: a peer that went away is a write
 * error). SIGINT/SIGTERM/SIGHUP stop the loop.
 */
#include "cli_print.h"
#include "view.h"
#include "stepscope_viewer_assets.h"
#include "sc_clock.h"
#include "sc_file.h"
#include "sc_thread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <stdint.h>
#include <signal.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Requests served at the same time (threads); complete heads beyond wait. */
#define VIEW_MAX_CONNECTIONS 32
/* Connections still sending their head; beyond this the oldest is closed. */
#define VIEW_MAX_PENDING 256
/* Seconds a connection has to send its whole request head. */
#define VIEW_HEAD_DEADLINE_S 10
/* Largest request head accepted (431 beyond). */
#define VIEW_HEAD_MAX 8192

#define VIEW_CSP                                                                                   \
  "default-src 'self'; script-src 'self' blob:; worker-src 'self' blob:; "                         \
  "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "             \
  "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* The access token (hex): the first segment of every path, /t/<token>/. */
static char view_token[33];
#define VIEW_TOKEN_PREFIX "/t/"

static int stop_requested = 0; /* out of memory; a signal sets view_stop_signal */

/* `extra` is further header lines, each ending in CRLF ("" for none). */
static void send_head_extra(int fd, int code, const char *reason, const char *type,
                            unsigned long long length, const char *extra) {
  char h[4096];
  int n = snprintf(h, sizeof h,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
                   "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                   "Content-Security-Policy: " VIEW_CSP "\r\nX-Frame-Options: DENY\r\n"
                   "Referrer-Policy: no-referrer\r\nCross-Origin-Resource-Policy: same-origin\r\n"
                   "%sConnection: close\r\n\r\n",
                   code, reason, type, length, extra);
  if (n > 0 && (size_t)n < sizeof h) sc_write_all(fd, h, (size_t)n);
}

static void send_head(int fd, int code, const char *reason, const char *type,
                      unsigned long long length) {
  send_head_extra(fd, code, reason, type, length, "");
}

static void send_error(int fd, int code, const char *reason, int head_only) {
  char body[128];
  int n = snprintf(body, sizeof body, "%d %s\n", code, reason);
  send_head(fd, code, reason, "text/plain; charset=utf-8", (unsigned long long)n);
  if (!head_only) sc_write_all(fd, body, (size_t)n);
}

static void send_memory(int fd, const char *type, const void *data, size_t len, int head_only) {
  send_head(fd, 200, "OK", type, len);
  if (!head_only) sc_write_all(fd, data, len);
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
    while (*h == ' ' || *h == '\t')
      h++;
    size_t len = strcspn(h, "\r\n");
    while (len && (h[len - 1] == ' ' || h[len - 1] == '\t'))
      len--;
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

static void send_file(int fd, const char *path, const char *name, const char *req_head,
                      int head_only) {
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
    send_head_extra(fd, 416, "Range Not Satisfiable", "text/plain; charset=utf-8", strlen(body),
                    extra);
    if (!head_only) sc_write_all(fd, body, strlen(body));
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
      if (r <= 0 || sc_write_all(fd, buf, (size_t)r) != 0) break;
      at += r;
      length -= (unsigned long long)r;
    }
    free(buf);
  }
  close(f);
}

/* The Host header of a head already checked by head_problem (exactly one). */
static int host_is_loopback(const char *head) {
  char host[256];
  if (header_value(head, "Host", host, sizeof host) != 0) return 1; /* HTTP/1.0 without one */
  char *end = host[0] == '[' ? strchr(host, ']') : strchr(host, ':');
  if (end && host[0] == '[') end++;
  if (end) *end = '\0';
  return strcmp(host, "127.0.0.1") == 0 || strcasecmp(host, "localhost") == 0 ||
         strcmp(host, "[::1]") == 0;
}

/* What is wrong with a complete head, as an HTTP status (0: nothing). Folded
 * lines (a line starting with a space or tab) are refused, as RFC 9112 allows;
 * HTTP/1.1 needs exactly one non-empty Host header. */
static int head_problem(const char *head, const char *version) {
  int hosts = 0;
  const char *h = head;
  while ((h = strchr(h, '\n')) != NULL) {
    h++;
    if (*h == '\r' || *h == '\n' || !*h) break; /* the blank line */
    if (*h == ' ' || *h == '\t') return 400;    /* obs-fold */
    if (strncasecmp(h, "Host:", 5) == 0) {
      const char *v = h + 5;
      while (*v == ' ' || *v == '\t')
        v++;
      if (*v == '\r' || *v == '\n') return 400; /* empty */
      hosts++;
    }
  }
  if (hosts > 1) return 400;
  if (hosts == 0 && strcmp(version, "HTTP/1.0") != 0) return 400;
  return 0;
}

/* Constant-time comparison of `len` bytes at v with the token. */
static int token_matches(const char *v, size_t len) {
  size_t n = strlen(view_token);
  if (len != n || n == 0) return 0;
  unsigned diff = 0;
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned)(unsigned char)(v[i] ^ view_token[i]);
  return diff == 0;
}

/* Where the route starts in a decoded path that begins with /t/<the token>
 * ("/" after it gives "/"): the rest of the path, or NULL without the token.
 * *bare is set when the path is exactly /t/<token> (no slash after it). */
static const char *path_after_token(const char *path, int *bare) {
  size_t pl = strlen(VIEW_TOKEN_PREFIX), tl = strlen(view_token);
  *bare = 0;
  if (strncmp(path, VIEW_TOKEN_PREFIX, pl) != 0) return NULL;
  const char *t = path + pl, *end = strchr(t, '/');
  size_t len = end ? (size_t)(end - t) : strlen(t);
  if (len != tl || !token_matches(t, len)) return NULL;
  if (!end) *bare = 1;
  return end ? end : t + len;
}

/* The run file `name` is one the viewer needs: the run's export, report or heatmap, the diff
 * generated for a comparison's run b, a PyTorch run's module tree or memory timeline. */
static int run_file_is_served(const view_run *run, const char *name) {
  for (int k = 0; k < VIEW_NFILES; k++)
    if (view_run_file_name(run, k)[0] && !strcmp(name, view_run_file_name(run, k))) return 1;
  return 0;
}

static void handle(int fd, const char *head, view_run *runs, int nruns, int loopback) {
  char method[16], target[4096], version[16], path[4096];
  if (sscanf(head, "%15s %4095s %15s", method, target, version) != 3 ||
      strncmp(version, "HTTP/1.", 7) != 0) {
    send_error(fd, 400, "Bad Request", 0);
    return;
  }
  int head_only = strcmp(method, "HEAD") == 0;
  if (!head_only && strcmp(method, "GET") != 0) {
    send_error(fd, 405, "Method Not Allowed", 0);
    return;
  }
  if (head_problem(head, version)) {
    send_error(fd, 400, "Bad Request", head_only);
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
  int bare;
  const char *route = path_after_token(path, &bare);
  if (!route) {
    const char *body = "403 Forbidden: open the URL that `stepscope view` printed (its path "
                       "carries the access token)\n";
    send_head(fd, 403, "Forbidden", "text/plain; charset=utf-8", strlen(body));
    if (!head_only) sc_write_all(fd, body, strlen(body));
    return;
  }
  if (bare) { /* /t/<token>: the viewer's relative URLs need the slash after it */
    const char *query = strchr(target, '?');
    char extra[256];
    snprintf(extra, sizeof extra, "Location: " VIEW_TOKEN_PREFIX "%s/%.150s\r\n", view_token,
             query ? query : "");
    const char *body = "303 See Other\n";
    send_head_extra(fd, 303, "See Other", "text/plain; charset=utf-8", strlen(body), extra);
    if (!head_only) sc_write_all(fd, body, strlen(body));
    return;
  }
  memmove(path, route, strlen(route) + 1);
  if (strcmp(path, "/") == 0) snprintf(path, sizeof path, "/index.html");
  if (strncmp(path, "/run/", 5) == 0) {
    const char *id = path + 5, *slash = strchr(id, '/');
    if (slash && strchr(slash + 1, '/') == NULL) {
      for (int i = 0; i < nruns; i++) {
        size_t idl = strlen(runs[i].id);
        if ((size_t)(slash - id) != idl || strncmp(id, runs[i].id, idl) != 0) continue;
        char resolved[PATH_MAX];
        if (run_file_is_served(&runs[i], slash + 1) &&
            view_run_file(&runs[i], slash + 1, resolved, sizeof resolved) == 0) {
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
    if (!json) {
      send_error(fd, 500, "Internal Server Error", head_only);
      return;
    }
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
  char *head; /* the complete request head (owned) */
  view_run *runs;
  int nruns, loopback;
} connection;

static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t active_changed = PTHREAD_COND_INITIALIZER;
static int active_connections = 0;

static void serve_connection(connection *c) {
  struct timeval tv = {5, 0};
  int fl = fcntl(c->fd, F_GETFL);
  if (fl >= 0) fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK); /* read non-blocking, written blocking */
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  handle(c->fd, c->head, c->runs, c->nruns, c->loopback);
  shutdown(c->fd, SHUT_WR);
  close(c->fd);
  free(c->head);
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

/* Serves a connection whose head is complete on a new thread, if fewer than
 * VIEW_MAX_CONNECTIONS are active (returns 1; `head` is taken), else returns 0
 * (try again later). On the calling thread if no thread can be made. */
static int dispatch(int fd, char *head, view_run *runs, int nruns, int loopback) {
  pthread_mutex_lock(&active_lock);
  if (active_connections >= VIEW_MAX_CONNECTIONS) {
    pthread_mutex_unlock(&active_lock);
    return 0;
  }
  active_connections++;
  pthread_mutex_unlock(&active_lock);
  connection local = {fd, head, runs, nruns, loopback};
  connection *c = malloc(sizeof *c);
  if (!c) {
    serve_connection(&local);
    pthread_mutex_lock(&active_lock);
    active_connections--;
    pthread_mutex_unlock(&active_lock);
    return 1;
  }
  *c = local;
  pthread_attr_t attr;
  pthread_t t;
  int made = pthread_attr_init(&attr) == 0;
  if (made) {
    /* The new thread blocks SIGINT/SIGTERM/SIGHUP so that they reach the
     * accepting thread and interrupt accept(). */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    made = sc_thread_start_unsignalled(&t, &attr, connection_thread, c) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!made) {
    serve_connection(c);
    free(c);
    pthread_mutex_lock(&active_lock);
    active_connections--;
    pthread_mutex_unlock(&active_lock);
  }
  return 1;
}

/* ---- reading request heads: one poll() loop on the accepting thread */

typedef struct pending {
  int fd;
  size_t len;
  double since_s; /* accepted at (sc_monotonic_s) */
  int complete;   /* head read whole, waiting for a free thread */
  int closing;    /* refused: answered, input drained until EOF or the linger */
  char *buf;      /* VIEW_HEAD_MAX + 1 bytes */
} pending;

static double seconds_since(double t) {
  return sc_monotonic_s() - t;
}

/* A short answer to a client whose head is refused; never blocks. */
static void refuse_now(int fd, int code, const char *reason) {
  char msg[512];
  int n = snprintf(msg, sizeof msg,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                   "Content-Length: %zu\r\nContent-Security-Policy: " VIEW_CSP "\r\n"
                   "Connection: close\r\n\r\n%d %s\n",
                   code, reason, strlen(reason) + 5, code, reason);
  if (n > 0 && (size_t)n < sizeof msg) {
    ssize_t w = send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
  }
}

/* Seconds a refused connection is drained before it is closed: closing a
 * socket with unread input resets it, and the client could lose the answer. */
#define VIEW_LINGER_S 2

static void drop_pending(pending *v, size_t *n, size_t i) {
  close(v[i].fd);
  free(v[i].buf);
  v[i] = v[--*n];
}

/* Answers pending connection i with an error and lets it drain. */
static void refuse_pending(pending *v, size_t i, int code, const char *reason) {
  refuse_now(v[i].fd, code, reason);
  shutdown(v[i].fd, SHUT_WR);
  v[i].closing = 1;
  v[i].since_s = sc_monotonic_s();
}

/* Reads what arrived on pending connection i. Returns 1 when its head is
 * complete, 0 to keep waiting, -1 when the connection was closed. */
static int read_pending(pending *v, size_t *n, size_t i) {
  pending *p = &v[i];
  if (p->closing) { /* drain and forget */
    char sink[4096];
    ssize_t r;
    while ((r = recv(p->fd, sink, sizeof sink, 0)) > 0) {
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      drop_pending(v, n, i);
      return -1;
    }
    return 0;
  }
  for (;;) {
    ssize_t r = recv(p->fd, p->buf + p->len, VIEW_HEAD_MAX - p->len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r <= 0) {
      drop_pending(v, n, i);
      return -1;
    }
    if (memchr(p->buf + p->len, '\0', (size_t)r)) { /* no NUL belongs in a head */
      refuse_pending(v, i, 400, "Bad Request");
      return 0;
    }
    p->len += (size_t)r;
    p->buf[p->len] = '\0';
    size_t from = p->len > (size_t)r + 3 ? p->len - (size_t)r - 3 : 0;
    if (strstr(p->buf + from, "\r\n\r\n") || strstr(p->buf + from, "\n\n")) return 1;
    if (p->len >= VIEW_HEAD_MAX) {
      refuse_pending(v, i, 431, "Request Header Fields Too Large");
      return 0;
    }
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

/* The access token (16 random bytes in hex); 0, or -1 with the message printed when the
 * system gives no random bytes. */
static int make_token(void) {
  unsigned char rnd[16];
  size_t got = 0;
  while (got < sizeof rnd) {
    ssize_t k = getrandom(rnd + got, sizeof rnd - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      fprintf(stderr, "stepscope view: no random bytes for the access token: %s\n",
              strerror(errno));
      return -1;
    }
    got += (size_t)k;
  }
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(view_token + 2 * i, 3, "%02x", rnd[i]);
  return 0;
}

/* What `view` prints when it starts serving: the URL with its token, what each run lacks,
 * and a warning when the address reaches beyond this machine. */
static void print_banner(FILE *out, const view_run *runs, int nruns, const char *bind_addr, int v6,
                         int port, int loopback) {
  fprintf(out, "stepscope view: serving %s%s%s at http://%s%s%s:%d" VIEW_TOKEN_PREFIX "%s/\n",
          runs[0].name, nruns > 1 ? " vs " : "", nruns > 1 ? runs[1].name : "", v6 ? "[" : "",
          bind_addr, v6 ? "]" : "", port, view_token);
  for (int i = 0; i < nruns; i++) {
    if (runs[i].missing[0])
      fprintf(out, "stepscope view: %s: missing %s\n", runs[i].name, runs[i].missing);
    if (runs[i].notes[0]) fprintf(out, "stepscope view: %s: %s\n", runs[i].name, runs[i].notes);
  }
  if (!loopback)
    fprintf(out,
            "stepscope view: warning: listening beyond this machine (%s) over plain HTTP; anyone "
            "who sees the URL's token can read the run's export and report\n",
            bind_addr);
  fprintf(out, "stepscope view: press Ctrl+C to stop\n");
  fflush(out);
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
    fprintf(stderr, "stepscope view: --bind %s: %s (give a numeric IPv4 or IPv6 address)\n",
            bind_addr, gai_strerror(rc));
    return 1;
  }
  int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (ls >= 0) setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) != 0 || listen(ls, 64) != 0) {
    int busy = errno == EADDRINUSE;
    cli_print(stderr, "stepscope view: cannot listen on %s port %d: %s%s\n", bind_addr, port,
              strerror(errno),
              busy ? " (another program holds it: choose one with --port N, or --port 0 for any "
                     "free port)"
                   : "");
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
  int actual =
      ntohs(v6 ? ((struct sockaddr_in6 *)&sa)->sin6_port : ((struct sockaddr_in *)&sa)->sin_port);
  if (make_token() != 0) {
    close(ls);
    return 1;
  }
  print_banner(out, runs, nruns, bind_addr, v6, actual, loopback);

  view_catch_stop_signals(); /* SIGHUP too: a closed terminal; the generated files go */
  signal(SIGPIPE, SIG_IGN);

  pending *pend = calloc(VIEW_MAX_PENDING, sizeof *pend);
  struct pollfd *pfd = calloc(VIEW_MAX_PENDING + 1, sizeof *pfd);
  size_t npend = 0;
  if (!pend || !pfd) {
    fprintf(stderr, "stepscope view: out of memory\n");
    stop_requested = 1;
  }
  while (!stop_requested && !view_stop_signal) {
    /* complete heads first: to a thread when one is free */
    int waiting = 0;
    for (size_t i = 0; i < npend;) {
      if (pend[i].complete) {
        if (dispatch(pend[i].fd, pend[i].buf, runs, nruns, loopback)) {
          pend[i] = pend[--npend]; /* fd and buffer now belong to the thread */
          continue;
        }
        waiting = 1;
      }
      i++;
    }
    /* heads past their deadline: 408 */
    int next_ms = 1000;
    for (size_t i = 0; i < npend;) {
      double age = seconds_since(pend[i].since_s);
      if (pend[i].closing && age >= VIEW_LINGER_S) {
        drop_pending(pend, &npend, i);
        continue;
      }
      if (!pend[i].complete && !pend[i].closing && age >= VIEW_HEAD_DEADLINE_S) {
        refuse_pending(pend, i, 408, "Request Timeout");
        age = 0;
      }
      if (!pend[i].complete) {
        int ms = (int)(((pend[i].closing ? VIEW_LINGER_S : VIEW_HEAD_DEADLINE_S) - age) * 1000) + 1;
        if (ms < next_ms) next_ms = ms;
      }
      i++;
    }
    if (waiting && next_ms > 20) next_ms = 20; /* a thread may free up */
    size_t np = 0;
    pfd[np++] = (struct pollfd){ls, POLLIN, 0};
    for (size_t i = 0; i < npend; i++)
      pfd[np++] = (struct pollfd){pend[i].fd, (short)(pend[i].complete ? 0 : POLLIN), 0};
    int pr = poll(pfd, np, next_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "stepscope view: poll: %s\n", strerror(errno));
      break;
    }
    /* the pending connections, from the end (drop_pending moves the last one) */
    for (size_t k = np; k-- > 1;) {
      size_t i = k - 1;
      if (i >= npend || pend[i].fd != pfd[k].fd || !pfd[k].revents) continue;
      if (read_pending(pend, &npend, i) == 1) pend[i].complete = 1;
    }
    if (pfd[0].revents & POLLIN) {
      int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EMFILE ||
            errno == ENFILE)
          continue;
        fprintf(stderr, "stepscope view: accept: %s\n", strerror(errno));
        break;
      }
      if (npend == VIEW_MAX_PENDING) { /* full: a draining one, else the oldest head goes */
        size_t oldest = npend;
        for (size_t i = 0; i < npend && oldest == npend; i++)
          if (pend[i].closing) oldest = i;
        for (size_t i = 0; i < npend && (oldest == npend || !pend[oldest].closing); i++)
          if (!pend[i].complete && (oldest == npend || seconds_since(pend[i].since_s) >
                                                           seconds_since(pend[oldest].since_s)))
            oldest = i;
        if (oldest == npend) { /* all complete and waiting for threads: refuse the new one */
          refuse_now(fd, 503, "Service Unavailable");
          close(fd);
          continue;
        }
        if (!pend[oldest].closing) refuse_now(pend[oldest].fd, 408, "Request Timeout");
        drop_pending(pend, &npend, oldest);
      }
      char *buf = malloc(VIEW_HEAD_MAX + 1);
      if (!buf) {
        close(fd);
        continue;
      }
      pending *p = &pend[npend++];
      memset(p, 0, sizeof *p);
      p->fd = fd;
      p->buf = buf;
      p->since_s = sc_monotonic_s();
    }
  }
  while (npend)
    drop_pending(pend, &npend, 0);
  free(pend);
  free(pfd);
  close(ls);
  wait_for_connections();
  return 0;
}
