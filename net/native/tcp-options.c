// Socket options Node has no call for (Linux), set on a connected TCP socket's descriptor:
// - TCP_USER_TIMEOUT, for the agent's connections to the proxy-servers. Node sets SO_KEEPALIVE and
//   TCP_KEEPIDLE (socket.setKeepAlive) but not this option, and without it a connection whose packets
//   vanish (a balancer's idle timeout, a conntrack flush) is given up only after ~15 minutes of
//   retransmissions while data is outstanding, or ten unanswered keepalive probes when idle. With it
//   the kernel drops the connection once nothing has been acknowledged for that long, idle or busy.
// - TCP_CONGESTION, for the agent's connections to the proxy-servers: the congestion control the
//   agent picks for them (net/tcp-congestion-control.ts).
// - SO_RCVBUF, for the agent's target connections: a fixed receive buffer instead of one the kernel
//   grows (to 6 MiB by default), so what a burst of targets holds in the kernel is bounded per
//   connection (net/tcp-receive-buffer.ts).
// Built by cmd/build-native.ts; without it the agent relies on keepalive probes alone
// (net/tcp-fault-detection.ts) and leaves receive buffers to the kernel.
#define NAPI_VERSION 8
#include <node_api.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

// Reads (fd, n) with fd >= 0 and n >= min; throws a TypeError saying `usage` otherwise.
static int fd_and_int(napi_env env, napi_callback_info info, int32_t *fd, int32_t *n, int32_t min, const char *usage) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_int32(env, argv[0], fd) != napi_ok || napi_get_value_int32(env, argv[1], n) != napi_ok ||
      *fd < 0 || *n < min) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  return 1;
}

// Throws an Error naming the option and errno.
static void throw_errno(napi_env env, const char *option) {
  char text[120];
  snprintf(text, sizeof text, "setsockopt(%s): %s", option, strerror(errno));
  napi_throw_error(env, NULL, text);
}

// setUserTimeout(fd, milliseconds): throws an Error naming errno when the kernel refuses.
static napi_value set_user_timeout(napi_env env, napi_callback_info info) {
  int32_t fd, ms;
  if (!fd_and_int(env, info, &fd, &ms, 0, "setUserTimeout(fd, milliseconds): two non-negative integers")) return NULL;
  unsigned int value = (unsigned int)ms;
  if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &value, sizeof value) != 0) throw_errno(env, "TCP_USER_TIMEOUT");
  return NULL;
}

// setReceiveBuffer(fd, bytes): SO_RCVBUF (the kernel doubles it, within net.core.rmem_max), which also
// turns off its autotuning for this socket. Throws an Error naming errno when the kernel refuses.
static napi_value set_receive_buffer(napi_env env, napi_callback_info info) {
  int32_t fd, bytes;
  if (!fd_and_int(env, info, &fd, &bytes, 1, "setReceiveBuffer(fd, bytes): a non-negative and a positive integer"))
    return NULL;
  int value = bytes;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof value) != 0) throw_errno(env, "SO_RCVBUF");
  return NULL;
}

// setCongestionControl(fd, name): TCP_CONGESTION. Throws an Error naming errno when the kernel refuses
// (an algorithm it does not have, or one net.ipv4.tcp_allowed_congestion_control keeps from this process).
static napi_value set_congestion_control(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  char name[32];
  size_t length;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      napi_get_value_string_utf8(env, argv[1], name, sizeof name, &length) != napi_ok || fd < 0 || length == 0) {
    napi_throw_type_error(env, NULL, "setCongestionControl(fd, name): a non-negative integer and a name");
    return NULL;
  }
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)length) != 0) {
    char text[120];
    snprintf(text, sizeof text, "setsockopt(TCP_CONGESTION, %s): %s", name, strerror(errno));
    napi_throw_error(env, NULL, text);
  }
  return NULL;
}

static int export_function(napi_env env, napi_value exports, const char *name, napi_callback cb) {
  napi_value fn;
  return napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn) == napi_ok &&
         napi_set_named_property(env, exports, name, fn) == napi_ok;
}

NAPI_MODULE_INIT() {
  if (!export_function(env, exports, "setUserTimeout", set_user_timeout) ||
      !export_function(env, exports, "setReceiveBuffer", set_receive_buffer) ||
      !export_function(env, exports, "setCongestionControl", set_congestion_control))
    return NULL;
  return exports;
}
