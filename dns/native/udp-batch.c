// Batched UDP for the DNS server (Linux). Node's dgram makes one sendmsg per answer, and at
// saturation that syscall is ~90% of the server's time; here a readable socket is drained with
// recvmmsg, each batch goes to JavaScript in one call, and the answers leave with one sendmmsg.
// DNS itself stays in TypeScript. Built by dns/native/build.ts; without it the server uses dgram.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
/* Larger queries are dropped: a DNS query is a few hundred bytes, EDNS caps responses, not queries. */
#define MAX_QUERY 4096
/* Batches per readable event before yielding to the event loop, so the tunnel, TCP and timers sharing
   it wait at most ~128 queries (libuv's own dgram reads 32). */
#define ROUNDS 2

typedef struct {
  int fd;
  int closing;
  int handle_closed;
  int collected;
  uv_poll_t poll;
  napi_env env;
  napi_ref on_batch;
  napi_async_context async_context; /* so async_hooks and AsyncLocalStorage see the batches */
  char bufs[BATCH][MAX_QUERY];
  struct sockaddr_storage from[BATCH];
  struct iovec iov[BATCH];
  struct mmsghdr msgs[BATCH];
} batch_socket;

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, "udp-batch: " #call " failed");     \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what, int err) {
  napi_value msg, code, error;
  char text[160];
  snprintf(text, sizeof text, "%s: %s", what, strerror(err));
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_string_utf8(env, err == EADDRINUSE ? "EADDRINUSE" : err == EADDRNOTAVAIL ? "EADDRNOTAVAIL" : err == EACCES ? "EACCES" : "EIO", NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, msg, &error);
  napi_throw(env, error);
  return NULL;
}

static void free_if_done(batch_socket *s) {
  if (s->handle_closed && s->collected) free(s);
}

static void on_handle_closed(uv_handle_t *handle) {
  batch_socket *s = handle->data;
  close(s->fd);
  s->handle_closed = 1;
  free_if_done(s);
}

static void on_collected(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  batch_socket *s = data;
  s->collected = 1;
  free_if_done(s);
}

static void deliver(batch_socket *s, int n) {
  napi_env env = s->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value msgs, peers, truncated_value, callback, global, result;
  /* Grown as filled: a dropped (truncated) datagram leaves no hole for JavaScript to trip on. */
  int ok = napi_create_array(env, &msgs) == napi_ok && napi_create_array(env, &peers) == napi_ok;
  uint32_t kept = 0, truncated = 0;
  for (int i = 0; ok && i < n; i++) {
    if (s->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
      truncated++;
      continue;
    }
    napi_value msg, peer;
    void *copy;
    ok = napi_create_buffer_copy(env, s->msgs[i].msg_len, s->bufs[i], &copy, &msg) == napi_ok &&
         napi_create_buffer_copy(env, s->msgs[i].msg_hdr.msg_namelen, &s->from[i], &copy, &peer) == napi_ok &&
         napi_set_element(env, msgs, kept, msg) == napi_ok && napi_set_element(env, peers, kept, peer) == napi_ok;
    kept++;
  }
  if (ok && (kept > 0 || truncated > 0) && napi_create_uint32(env, truncated, &truncated_value) == napi_ok &&
      napi_get_reference_value(env, s->on_batch, &callback) == napi_ok && napi_get_global(env, &global) == napi_ok) {
    napi_value argv[3] = {msgs, peers, truncated_value};
    if (napi_make_callback(env, s->async_context, global, callback, 3, argv, &result) == napi_pending_exception) {
      /* The server's handler catches and counts its own failures (dns/server.ts); should one escape
         anyway, drop the batch rather than take the process down. */
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
  }
  napi_close_handle_scope(env, scope);
}

static void on_readable(uv_poll_t *handle, int status, int events) {
  (void)events;
  batch_socket *s = handle->data;
  if (status < 0 || s->closing) return;
  for (int round = 0; round < ROUNDS && !s->closing; round++) {
    for (int i = 0; i < BATCH; i++) {
      s->iov[i].iov_base = s->bufs[i];
      s->iov[i].iov_len = MAX_QUERY;
      memset(&s->msgs[i], 0, sizeof s->msgs[i]);
      s->msgs[i].msg_hdr.msg_iov = &s->iov[i];
      s->msgs[i].msg_hdr.msg_iovlen = 1;
      s->msgs[i].msg_hdr.msg_name = &s->from[i];
      s->msgs[i].msg_hdr.msg_namelen = sizeof s->from[i];
    }
    int n = recvmmsg(s->fd, s->msgs, BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0) return; /* EAGAIN: drained; other errors (ICMP reports) are not the server's business */
    deliver(s, n);
    if (n < BATCH) return;
  }
}

/* open(address: string, port: number, onBatch(msgs: Buffer[], peers: Buffer[])) -> [handle, port] */
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char address[64];
  size_t len;
  int32_t port;
  CHECK(napi_get_value_string_utf8(env, argv[0], address, sizeof address, &len));
  CHECK(napi_get_value_int32(env, argv[1], &port));

  struct sockaddr_storage bind_addr;
  socklen_t bind_len;
  memset(&bind_addr, 0, sizeof bind_addr);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&bind_addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&bind_addr;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    bind_len = sizeof *v4;
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    bind_len = sizeof *v6;
  } else {
    napi_throw_error(env, "EINVAL", "udp-batch: not an IP address");
    return NULL;
  }

  int fd = socket(bind_addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int off = 0, rcvbuf = 4 << 20;
  if (bind_addr.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off); /* as dgram: '::' takes IPv4 too */
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);                                       /* as dns/udp-buffer.ts; capped by rmem_max */
  if (bind(fd, (struct sockaddr *)&bind_addr, bind_len) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, "bind", err);
  }
  struct sockaddr_storage bound;
  socklen_t bound_len = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &bound_len);
  int bound_port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port : ((struct sockaddr_in6 *)&bound)->sin6_port);

  batch_socket *s = calloc(1, sizeof *s);
  if (s == NULL) {
    close(fd);
    return throw_errno(env, "calloc", ENOMEM);
  }
  s->fd = fd;
  s->env = env;
  uv_loop_t *loop;
  napi_value handle, port_value, result, resource_name;
  if (napi_create_reference(env, argv[2], 1, &s->on_batch) != napi_ok || napi_get_uv_event_loop(env, &loop) != napi_ok ||
      napi_create_string_utf8(env, "spoke-agent:udp-batch", NAPI_AUTO_LENGTH, &resource_name) != napi_ok ||
      napi_async_init(env, NULL, resource_name, &s->async_context) != napi_ok || uv_poll_init(loop, &s->poll, fd) != 0) {
    if (s->on_batch != NULL) napi_delete_reference(env, s->on_batch);
    if (s->async_context != NULL) napi_async_destroy(env, s->async_context);
    close(fd);
    free(s);
    napi_throw_error(env, NULL, "udp-batch: cannot watch the socket");
    return NULL;
  }
  s->poll.data = s;
  uv_poll_start(&s->poll, UV_READABLE, on_readable);
  CHECK(napi_create_external(env, s, on_collected, NULL, &handle));
  CHECK(napi_create_int32(env, bound_port, &port_value));
  CHECK(napi_create_array_with_length(env, 2, &result));
  CHECK(napi_set_element(env, result, 0, handle));
  CHECK(napi_set_element(env, result, 1, port_value));
  return result;
}

/* send(handle, answers: Buffer[], peers: Buffer[]) -> how many the kernel took: datagrams it will not take
   now are dropped, as UDP does, and the caller counts them. */
static napi_value js_send(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], result;
  batch_socket *s;
  uint32_t n, peers_n, accepted = 0;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  CHECK(napi_get_value_external(env, argv[0], (void **)&s));
  CHECK(napi_get_array_length(env, argv[1], &n));
  CHECK(napi_get_array_length(env, argv[2], &peers_n));
  if (s->closing || n != peers_n) n = 0;
  struct mmsghdr out[BATCH];
  struct iovec iov[BATCH];
  for (uint32_t done = 0; done < n;) {
    uint32_t count = n - done < BATCH ? n - done : BATCH;
    uint32_t filled = 0;
    for (uint32_t i = 0; i < count; i++) {
      napi_value answer, peer;
      void *answer_data, *peer_data;
      size_t answer_len, peer_len;
      CHECK(napi_get_element(env, argv[1], done + i, &answer));
      CHECK(napi_get_element(env, argv[2], done + i, &peer));
      if (napi_get_buffer_info(env, answer, &answer_data, &answer_len) != napi_ok || napi_get_buffer_info(env, peer, &peer_data, &peer_len) != napi_ok ||
          peer_len > sizeof(struct sockaddr_storage))
        continue;
      iov[filled].iov_base = answer_data;
      iov[filled].iov_len = answer_len;
      memset(&out[filled], 0, sizeof out[filled]);
      out[filled].msg_hdr.msg_iov = &iov[filled];
      out[filled].msg_hdr.msg_iovlen = 1;
      out[filled].msg_hdr.msg_name = peer_data;
      out[filled].msg_hdr.msg_namelen = (socklen_t)peer_len;
      filled++;
    }
    for (uint32_t sent = 0; sent < filled;) {
      int r = sendmmsg(s->fd, out + sent, filled - sent, MSG_DONTWAIT);
      if (r > 0) {
        sent += (uint32_t)r;
        accepted += (uint32_t)r;
      } else if (r < 0 && errno == EINTR) continue;
      else if (r < 0 && errno != EAGAIN && errno != ENOBUFS) sent++; /* skip the datagram that failed (e.g. a bad peer) */
      else break;                                                    /* the socket is full: drop the rest */
    }
    done += count;
  }
  CHECK(napi_create_uint32(env, accepted, &result));
  return result;
}

/* close(handle): stops reading; the memory goes when the handle is both closed and collected. */
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  batch_socket *s;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  CHECK(napi_get_value_external(env, argv[0], (void **)&s));
  if (s->closing) return NULL;
  s->closing = 1;
  napi_delete_reference(env, s->on_batch);
  napi_async_destroy(env, s->async_context);
  uv_poll_stop(&s->poll);
  uv_close((uv_handle_t *)&s->poll, on_handle_closed);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  const char *names[] = {"open", "send", "close"};
  napi_callback callbacks[] = {js_open, js_send, js_close};
  for (int i = 0; i < 3; i++) {
    napi_value fn;
    CHECK(napi_create_function(env, names[i], NAPI_AUTO_LENGTH, callbacks[i], NULL, &fn));
    CHECK(napi_set_named_property(env, exports, names[i], fn));
  }
  return exports;
}

NAPI_MODULE(udp_batch, init)
