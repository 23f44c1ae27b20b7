// TCP_USER_TIMEOUT for the agent's connections to the proxy-servers (Linux). Node sets SO_KEEPALIVE
// and TCP_KEEPIDLE (socket.setKeepAlive) but not this option, and without it a connection whose
// packets vanish (a balancer's idle timeout, a conntrack flush) is given up only after ~15 minutes of
// retransmissions while data is outstanding, or ten unanswered keepalive probes when idle. With it the
// kernel drops the connection once nothing has been acknowledged for that long, idle or busy.
// Built by cmd/build-native.ts; without it the agent relies on keepalive probes alone (net/tcp-fault-detection.ts).
#define NAPI_VERSION 8
#include <node_api.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

// setUserTimeout(fd, milliseconds): throws an Error naming errno when the kernel refuses.
static napi_value set_user_timeout(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd, ms;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[1], &ms) != napi_ok ||
      fd < 0 || ms < 0) {
    napi_throw_type_error(env, NULL, "setUserTimeout(fd, milliseconds): two non-negative integers");
    return NULL;
  }
  unsigned int value = (unsigned int)ms;
  if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &value, sizeof value) != 0) {
    char text[120];
    snprintf(text, sizeof text, "setsockopt(TCP_USER_TIMEOUT): %s", strerror(errno));
    napi_throw_error(env, NULL, text);
  }
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "setUserTimeout", NAPI_AUTO_LENGTH, set_user_timeout, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "setUserTimeout", fn) != napi_ok)
    return NULL;
  return exports;
}
