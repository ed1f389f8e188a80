/*
 * Open-loop HTTP/1.1 load generator for bench/loadgen.ts (`opengen` option).
 *
 * Sends pre-signed webhook deliveries on a fixed schedule (request i is due at
 * t0 + i / rate) over up to `max conns` keep-alive connections, whatever the
 * server does, and measures each request's latency from its *scheduled* time
 * to the end of its answer, so a stall shows up in the percentiles instead of
 * slowing the sender down. A request that finds every connection busy waits
 * in a FIFO, and its wait counts. The schedule is kept with a timerfd at
 * nanosecond resolution on one epoll loop. (The Node generator's 1 ms timers
 * and node:http client add about a millisecond to every answer and take about
 * a quarter of a core at 2,500/s, on a machine the server shares.)
 *
 * Usage:
 *   opengen <host> <port> <rate/s> <timeout ms> <max conns> < input > output
 * Input (stdin: a pipe, so nothing is written to the disk that the server
 * under test syncs to, right before the measurement):
 *   the body templates, one line per event type, its three parts separated by
 *   tabs (body = p1 + event id + p2 + application id + p3); a line "--"; then
 *   one line per request, in send order:
 *   msg_id \t timestamp \t signature \t event_id \t application_id \t type (1-based)
 * Output (stdout): one 32-byte record per request, in send order, little
 *   endian: int32 status (0: socket error, timeout, or never answered), int32
 *   accepted (1 if the body contains "accepted"), double latency in ms from
 *   the scheduled time to the end of the answer, double wall-clock ms
 *   (CLOCK_REALTIME) when the status line and headers had arrived, double ms
 *   from the scheduled time to when this generator woke up and took the
 *   request (its own lateness, part of the latency; a lower bound of its
 *   share, since a late write or a late read of the answer is not in it); then one
 *   JSON line {"sent":n,"answered":n (with a status),"elapsed_s":x (to the last answer),"send_s":x (to
 *   the last send, plus one interval),"max_in_flight":n,"max_send_lag_ms":x}.
 * Exit code 0; 2 with a message on stderr for bad arguments or input.
 *
 * Bounded: a written request is answered, fails, or times out `timeout ms`
 * after it was written (checked every 100 ms); the run ends at the latest
 * `timeout ms` + 1.1 s after the last scheduled send.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  int32_t status;
  int32_t accepted;
  double latency_ms;
  double ack_wall_ms;
  double send_lag_ms;
} Result;

enum { C_FREE, C_CONNECTING, C_IDLE, C_BUSY };

typedef struct {
  int fd;
  int state;
  uint32_t gen;    /* bumped per socket, so a stale event for a reused slot is ignored */
  long req;        /* request in flight, -1 none */
  int64_t sent_ns; /* when it was handed to this connection */
  size_t woff;     /* bytes of it written */
  char *rbuf;
  size_t rlen, rcap;
  int headers_done;
  size_t body_start;
  long content_length; /* -1: not given */
  int chunked, to_close, status;
  double ack_wall_ms;
} Conn;

static char **reqs;
static size_t *req_len;
static long total;
static Result *results;
static Conn *conns;
static int max_conns, open_conns, *idle, n_idle;
static long *pending, pend_head, pend_tail;
static long next_req, completed, in_flight, max_in_flight;
static int64_t t0, interval_ns, timeout_ns, last_done_ns, last_send_ns;
static double max_lag_ms;
static int ep;
static struct sockaddr_in addr;

static void die(const char *what) {
  fprintf(stderr, "opengen: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
  exit(2);
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int64_t sched_ns(long i) { return t0 + (int64_t)i * interval_ns; }

static char *read_stdin(size_t *len) {
  size_t cap = 1 << 20, got = 0;
  char *buf = malloc(cap);
  if (!buf) die("out of memory");
  for (;;) {
    if (cap - got < 65536) {
      cap *= 2;
      buf = realloc(buf, cap);
      if (!buf) die("out of memory");
    }
    ssize_t n = read(0, buf + got, cap - got - 1);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("reading stdin");
    got += (size_t)n;
  }
  buf[got] = 0;
  *len = got;
  return buf;
}

/* Splits `s` in place at `sep` into at most `max` fields; returns the count. */
static int split(char *s, char sep, char **out, int max) {
  int n = 0;
  out[n++] = s;
  for (char *p = s; *p && n < max; p++)
    if (*p == sep) {
      *p = 0;
      out[n++] = p + 1;
    }
  return n;
}

static void load(const char *host_port) {
  size_t len;
  char *in = read_stdin(&len);
  char *parts[64][3];
  int ntypes = 0, in_templates = 1;
  long lines = 0;
  for (size_t i = 0; i < len; i++) lines += in[i] == '\n';
  reqs = calloc((size_t)lines + 1, sizeof *reqs);
  req_len = calloc((size_t)lines + 1, sizeof *req_len);
  if (!reqs || !req_len) die("out of memory");
  char *save = NULL;
  for (char *line = strtok_r(in, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (in_templates) {
      if (strcmp(line, "--") == 0) {
        in_templates = 0;
        continue;
      }
      if (ntypes == 64) die("more than 64 templates");
      char *f[3];
      if (split(line, '\t', f, 3) != 3) die("a template line does not have three parts");
      memcpy(parts[ntypes++], f, sizeof f);
      continue;
    }
    char *f[6];
    if (split(line, '\t', f, 6) != 6) die("a delivery line does not have six fields");
    int type = atoi(f[5]);
    if (type < 1 || type > ntypes) die("a delivery line names a template that does not exist");
    char **p = parts[type - 1];
    size_t body = strlen(p[0]) + strlen(f[3]) + strlen(p[1]) + strlen(f[4]) + strlen(p[2]);
    char *r = NULL;
    int n = asprintf(&r,
                     "POST /webhooks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "webhook-id: %s\r\nwebhook-timestamp: %s\r\nwebhook-signature: v1,%s\r\n\r\n%s%s%s%s%s",
                     host_port, body, f[0], f[1], f[2], p[0], f[3], p[1], f[4], p[2]);
    if (n < 0) die("out of memory");
    reqs[total] = r;
    req_len[total++] = (size_t)n;
  }
  free(in);
}

static void finish(long i, int status, int accepted, double ack_wall_ms, int64_t now) {
  results[i].status = status;
  results[i].accepted = accepted;
  results[i].latency_ms = (double)(now - sched_ns(i)) / 1e6;
  results[i].ack_wall_ms = ack_wall_ms;
  completed++;
  in_flight--;
  last_done_ns = now;
}

static void reset_read(Conn *c) {
  c->rlen = 0;
  c->headers_done = 0;
  c->body_start = 0;
  c->content_length = -1;
  c->chunked = c->to_close = c->status = 0;
  c->ack_wall_ms = 0;
}

static void close_conn(Conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->state = C_FREE;
  c->req = -1;
  open_conns--;
}

static void dispatch(long i, int64_t now);

/* Closes a connection: its request, if any, is recorded as a socket error; a waiting request takes the slot. */
static void drop_conn(Conn *c, int64_t now) {
  if (c->req >= 0) finish(c->req, 0, 0, 0, now);
  close_conn(c);
  if (pend_head < pend_tail) dispatch(pending[pend_head++], now);
}

static void write_some(Conn *c, int64_t now) {
  while (c->state == C_BUSY && c->woff < req_len[c->req]) {
    ssize_t n = write(c->fd, reqs[c->req] + c->woff, req_len[c->req] - c->woff);
    if (n > 0) c->woff += (size_t)n;
    else if (n < 0 && errno == EAGAIN) return; /* EPOLLOUT (edge triggered) brings us back */
    else if (n < 0 && errno == EINTR) continue;
    else {
      drop_conn(c, now);
      return;
    }
  }
}

static void start(Conn *c, long i, int64_t now) {
  c->req = i;
  c->woff = 0;
  c->sent_ns = now;
  c->state = C_BUSY;
  reset_read(c);
  write_some(c, now);
}

static int open_conn(long i, int64_t now) {
  int slot = -1;
  for (int s = 0; s < max_conns; s++)
    if (conns[s].state == C_FREE) {
      slot = s;
      break;
    }
  if (slot < 0) return -1;
  Conn *c = &conns[slot];
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) die("socket");
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  open_conns++;
  c->gen++;
  c->req = i;
  c->sent_ns = now;
  reset_read(c);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.u64 = ((uint64_t)c->gen << 32) | (uint32_t)slot};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
  if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) == 0) start(c, i, now);
  else if (errno == EINPROGRESS) c->state = C_CONNECTING;
  else {
    c->state = C_BUSY;
    drop_conn(c, now);
  }
  return 0;
}

static void dispatch(long i, int64_t now) {
  if (n_idle > 0) start(&conns[idle[--n_idle]], i, now);
  else if (open_conns >= max_conns || open_conn(i, now) != 0) pending[pend_tail++] = i;
}

static void send_due(int64_t now) {
  while (next_req < total && sched_ns(next_req) <= now) {
    long i = next_req++;
    double lag = (double)(now - sched_ns(i)) / 1e6;
    results[i].send_lag_ms = lag;
    if (lag > max_lag_ms) max_lag_ms = lag;
    in_flight++;
    if (in_flight > max_in_flight) max_in_flight = in_flight;
    last_send_ns = now;
    dispatch(i, now);
  }
}

/* The answer on `c` is complete: record it, and give the connection the next waiting request. */
static void answered(Conn *c, int64_t now) {
  const char *body = c->rbuf + c->body_start;
  size_t blen = c->rlen - c->body_start;
  if (!c->chunked && c->content_length >= 0 && (size_t)c->content_length < blen) blen = (size_t)c->content_length;
  int accepted = memmem(body, blen, "\"accepted\"", 10) != NULL;
  finish(c->req, c->status, accepted, c->ack_wall_ms, now);
  c->req = -1;
  if (c->to_close) {
    drop_conn(c, now);
    return;
  }
  c->state = C_IDLE;
  reset_read(c);
  if (pend_head < pend_tail) start(c, pending[pend_head++], now);
  else idle[n_idle++] = (int)(c - conns);
}

/* The value of header `name` in the header block [h, h + hlen), or NULL. */
static const char *header(const char *h, size_t hlen, const char *name, const char **eol_out) {
  size_t nl = strlen(name);
  for (const char *p = h; p < h + hlen;) {
    const char *eol = memmem(p, (size_t)(h + hlen - p), "\r\n", 2);
    if (!eol) eol = h + hlen;
    if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      *eol_out = eol;
      return p + nl + 1;
    }
    p = eol + 2;
  }
  return NULL;
}

static int header_contains(const char *h, size_t hlen, const char *name, const char *word) {
  const char *eol;
  const char *v = header(h, hlen, name, &eol);
  if (!v) return 0;
  size_t wl = strlen(word);
  for (; v + wl <= eol; v++)
    if (strncasecmp(v, word, wl) == 0) return 1;
  return 0;
}

/* 1: the chunked body from body_start is complete. */
static int chunked_complete(Conn *c) {
  size_t p = c->body_start;
  for (;;) {
    char *eol = memmem(c->rbuf + p, c->rlen - p, "\r\n", 2);
    if (!eol) return 0;
    unsigned long size = strtoul(c->rbuf + p, NULL, 16);
    size_t data = (size_t)(eol - c->rbuf) + 2;
    if (size == 0) return memmem(c->rbuf + data - 2, c->rlen - (data - 2), "\r\n\r\n", 4) != NULL;
    if (size > c->rlen - data || c->rlen - data - size < 2) return 0; /* not all here (or a size too large to be): wait, or time out */
    p = data + size + 2;
  }
}

/* Parses what has arrived; returns 1 when the answer is complete. */
static int parse(Conn *c) {
  while (!c->headers_done) {
    char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (!end) return 0;
    int status = strncmp(c->rbuf, "HTTP/1.", 7) == 0 && c->rlen > 12 ? atoi(c->rbuf + 9) : 0;
    if (status >= 100 && status < 200 && status != 101) {
      /* An interim answer (100 Continue, 103 Early Hints): drop it and read the final one. */
      size_t skip = (size_t)(end - c->rbuf) + 4;
      memmove(c->rbuf, c->rbuf + skip, c->rlen - skip);
      c->rlen -= skip;
      continue;
    }
    c->headers_done = 1;
    c->ack_wall_ms = wall_ms();
    c->body_start = (size_t)(end - c->rbuf) + 4;
    size_t hlen = c->body_start - 2;
    c->status = strncmp(c->rbuf, "HTTP/1.", 7) == 0 && c->rlen > 12 ? atoi(c->rbuf + 9) : 0;
    const char *eol;
    const char *cl = header(c->rbuf, hlen, "content-length", &eol);
    c->content_length = cl ? strtol(cl, NULL, 10) : -1;
    c->chunked = header_contains(c->rbuf, hlen, "transfer-encoding", "chunked");
    c->to_close = header_contains(c->rbuf, hlen, "connection", "close") || strncmp(c->rbuf, "HTTP/1.0", 8) == 0;
    if (c->status == 204 || c->status == 304 || c->status == 101) c->content_length = 0;
  }
  if (c->chunked) return chunked_complete(c);
  if (c->content_length >= 0) return c->rlen >= c->body_start + (size_t)c->content_length;
  return 0; /* a body that ends when the connection closes */
}

static void readable(Conn *c, int64_t now) {
  for (;;) {
    if (c->rcap - c->rlen < 4096) {
      c->rcap = c->rcap ? c->rcap * 2 : 16384;
      c->rbuf = realloc(c->rbuf, c->rcap);
      if (!c->rbuf) die("out of memory");
    }
    ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen - 1);
    if (n > 0) {
      if (c->state != C_BUSY) continue; /* nothing is expected on an idle connection */
      c->rlen += (size_t)n;
      if (parse(c)) {
        answered(c, now);
        /* Read on until EAGAIN (edge triggered): a close right behind the answer must be seen now,
           or the connection would go back to the idle stack dead. */
        if (c->state == C_FREE) return;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    /* end of stream or an error */
    if (c->state == C_BUSY && c->headers_done && !c->chunked && c->content_length < 0) {
      c->to_close = 1;
      answered(c, now);
      return;
    }
    if (c->state == C_BUSY || c->state == C_CONNECTING) {
      drop_conn(c, now);
      return;
    }
    for (int k = 0; k < n_idle; k++) /* an idle connection the server closed */
      if (idle[k] == (int)(c - conns)) {
        idle[k] = idle[--n_idle];
        break;
      }
    close_conn(c);
    return;
  }
}

static void writable(Conn *c, int64_t now) {
  if (c->state == C_CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      c->state = C_BUSY;
      drop_conn(c, now);
    } else start(c, c->req, now);
    return;
  }
  if (c->state == C_BUSY) write_some(c, now);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: opengen <host> <port> <rate/s> <timeout ms> <max conns> < input > output\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN); /* a peer that closed shows up as EPIPE on write, handled as a failed connection */
  double rate = atof(argv[3]);
  long timeout_ms = atol(argv[4]);
  max_conns = atoi(argv[5]);
  if (rate <= 0 || timeout_ms <= 0 || max_conns <= 0) die("rate, timeout and max conns must be positive");
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) die("host must be an IPv4 address");
  char host_port[128];
  snprintf(host_port, sizeof host_port, "%s:%s", argv[1], argv[2]);
  load(host_port);
  if (total == 0) die("no deliveries");

  results = calloc((size_t)total, sizeof *results);
  conns = calloc((size_t)max_conns, sizeof *conns);
  idle = calloc((size_t)max_conns, sizeof *idle);
  pending = calloc((size_t)total, sizeof *pending);
  if (!results || !conns || !idle || !pending) die("out of memory");
  for (int s = 0; s < max_conns; s++) conns[s] = (Conn){.fd = -1, .state = C_FREE, .req = -1};
  ep = epoll_create1(EPOLL_CLOEXEC);
  int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (ep < 0 || tfd < 0) die("epoll/timerfd");
  struct epoll_event tev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) != 0) die("epoll_ctl");

  interval_ns = (int64_t)(1e9 / rate);
  timeout_ns = (int64_t)timeout_ms * 1000000;
  t0 = mono_ns() + 20000000;
  int64_t deadline = sched_ns(total - 1) + timeout_ns + 1000000000;
  int64_t next_check = t0;
  struct epoll_event evs[256];
  while (completed < total) {
    int64_t now = mono_ns();
    send_due(now);
    if (now >= next_check) {
      /* Written longer ago than the timeout: a socket error, like the Node client's timeout. */
      for (int s = 0; s < max_conns; s++) {
        Conn *c = &conns[s];
        if ((c->state == C_BUSY || c->state == C_CONNECTING) && c->req >= 0 && now - c->sent_ns > timeout_ns) drop_conn(c, now);
      }
      next_check = now + 100000000;
      if (now > deadline) break;
    }
    int64_t wake = next_req < total && sched_ns(next_req) < next_check ? sched_ns(next_req) : next_check;
    struct itimerspec its = {.it_value = {.tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000}};
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) die("timerfd_settime");
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    now = mono_ns();
    for (int k = 0; k < n; k++) {
      uint64_t key = evs[k].data.u64;
      if (key == UINT64_MAX) {
        uint64_t expirations;
        if (read(tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("timerfd read");
        continue;
      }
      Conn *c = &conns[(uint32_t)key];
      if (c->state == C_FREE || c->gen != (uint32_t)(key >> 32)) continue;
      if (evs[k].events & EPOLLOUT) writable(c, now);
      if (c->state != C_FREE && (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) readable(c, now);
    }
  }
  /* Past the deadline, whatever is still written or waiting was never answered (status 0). */
  int64_t end = completed == total ? last_done_ns : mono_ns();
  for (int s = 0; s < max_conns; s++)
    if (conns[s].state != C_FREE && conns[s].req >= 0) finish(conns[s].req, 0, 0, 0, end);
  while (pend_head < pend_tail) finish(pending[pend_head++], 0, 0, 0, end);
  size_t bytes = (size_t)total * sizeof *results, done = 0;
  while (done < bytes) {
    ssize_t n = write(1, (char *)results + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("writing results");
    done += (size_t)n;
  }
  long answered_n = 0;
  for (long i = 0; i < total; i++) answered_n += results[i].status > 0;
  /* send_s: from the first scheduled time to the last request taken, plus one interval (n sends on
     time span n intervals), so sent / send_s is the rate the sender kept, not stretched by the time
     the last answers took. */
  printf("{\"sent\":%ld,\"answered\":%ld,\"elapsed_s\":%.6f,\"send_s\":%.6f,\"max_in_flight\":%ld,\"max_send_lag_ms\":%.3f}\n", next_req,
         answered_n, (double)(end - t0) / 1e9, (double)(last_send_ns - t0 + interval_ns) / 1e9, max_in_flight, max_lag_ms);
  return 0;
}
