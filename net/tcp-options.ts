// The TCP options Node has no call for, from the Node-API helper net/native/tcp-options.c (built
// into build/ by cmd/build-native.ts), or why they cannot be set here.
import type net from 'node:net';
import { nativeAddon } from './native-addon.js';

interface TcpOptionsModule {
  setUserTimeout(fd: number, ms: number): void;
  setReceiveBuffer(fd: number, bytes: number): void;
  setCongestionControl(fd: number, name: string): void;
}

const tcpOptions = () => nativeAddon<TcpOptionsModule>('tcp-options');

/** Why the helper's options cannot be set here, or undefined when they can. */
export function tcpOptionsUnavailable(): string | undefined {
  if (process.platform !== 'linux')
    return 'TCP_USER_TIMEOUT, TCP_CONGESTION and SO_RCVBUF are set through a Linux helper';
  return tcpOptions() ? undefined : 'build/tcp-options.node is not built (npm run build:native)';
}

/** Calls `set` with the helper and the socket's descriptor; returns what went wrong, or undefined. */
export function withDescriptor(
  socket: net.Socket,
  set: (module: TcpOptionsModule, fd: number) => void,
): string | undefined {
  const module = tcpOptions();
  if (!module) return tcpOptionsUnavailable();
  // libuv's TCP handle exposes its descriptor; Node has no public accessor for it.
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return 'the socket has no file descriptor';
  try {
    set(module, fd);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}
