// `spoke-agent dial [flags] HOST:PORT`: open one connection through a konnectivity proxy-server and
// pipe stdin/stdout through it, like nc. Flags are named as in the Go test-client (ANP cmd/test-client).
import { readFileSync } from 'node:fs';
import type { Duplex, Readable, Writable } from 'node:stream';
import { bool, duration, FlagError, int, parseFlags, str, usage, type Values } from '../flags/flags.js';
import { defaultDialTimeoutMs, dialThroughProxy, type DialEvent } from '../client/dial.js';

export const dialFlags = {
  mode: str('mode', 'grpc', "Mode can be either 'grpc' or 'http-connect'.", {
    validate: (v) =>
      v === 'grpc' || v === 'http-connect'
        ? undefined
        : `mode must be set to either 'grpc' or 'http-connect' not "${v}"`,
  }),
  proxyHost: str('proxy-host', 'localhost', 'The host of the proxy server.'),
  proxyPort: int(
    'proxy-port',
    8090,
    'The port the proxy server is listening on (the gRPC or the HTTP CONNECT frontend, per --mode).',
  ),
  proxyUds: str(
    'proxy-uds',
    '',
    "The UDS name to connect to (the proxy server's --uds-name) instead of --proxy-host and --proxy-port; plaintext.",
  ),
  caCert: str('ca-cert', '', 'If non-empty, the CA that signs the proxy server certificate; turns TLS on.'),
  clientCert: str('client-cert', '', 'If non-empty, secure communication with this cert (mTLS).'),
  clientKey: str('client-key', '', 'If non-empty, secure communication with this key (mTLS).'),
  dialTimeout: duration('dial-timeout', defaultDialTimeoutMs, 'How long to wait for the agent to dial.'),
  closeOnEof: bool(
    'close-on-eof',
    false,
    'Close the connection when stdin ends (the protocol has no half-close, so the reply may be cut short).',
  ),
  verbose: bool('verbose', false, 'Print timings and packets to stderr.'),
  help: bool('help', false, 'Show this help.'),
};

export interface DialIo {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

const processIo = (): DialIo => ({ stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });

function formatEvent(e: DialEvent): string {
  const at = `${e.ms.toFixed(1).padStart(8)} ms`;
  switch (e.kind) {
    case 'connected':
      return `${at}  connected to ${e.to}`;
    case 'sent':
    case 'received':
      return `${at}  ${e.kind === 'sent' ? '->' : '<-'} ${e.packet}${e.detail ? ` ${e.detail}` : ''}`;
    case 'established':
      return `${at}  established${e.connectID ? ` connectID=${e.connectID}` : ''}`;
    case 'closed':
      return `${at}  closed: ${e.reason}`;
  }
}

/** Returns the exit code: 0 after the connection closes, 1 when the dial fails, 2 on bad usage. */
export async function runDialCommand(argv: string[], io: DialIo = processIo()): Promise<number> {
  const fail = (code: number, message: string) => {
    io.stderr.write(`spoke-agent dial: ${message}\n`);
    return code;
  };
  let o: Values<typeof dialFlags>;
  let positionals: string[];
  try {
    ({ values: o, positionals } = parseFlags(dialFlags, argv));
  } catch (err) {
    if (err instanceof FlagError) return fail(2, err.message);
    throw err;
  }
  if (o.help) {
    io.stdout.write(`Usage: spoke-agent dial [flags] HOST:PORT\n\n${usage(dialFlags)}\n`);
    return 0;
  }
  if (positionals.length !== 1 || !/:\d+$/.test(positionals[0]!)) return fail(2, 'expected one HOST:PORT to dial');
  if ((o.clientCert === '') !== (o.clientKey === '')) return fail(2, '--client-cert and --client-key go together');
  if (o.proxyUds !== '' && (o.caCert !== '' || o.clientCert !== ''))
    return fail(
      2,
      '--proxy-uds is plaintext, as the proxy server serves it: no --ca-cert, --client-cert or --client-key with it',
    );

  let pem: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  try {
    const read = (path: string) => (path === '' ? undefined : readFileSync(path));
    pem = { ca: read(o.caCert), cert: read(o.clientCert), key: read(o.clientKey) };
  } catch (err) {
    return fail(2, (err as Error).message);
  }

  const mode = o.mode as 'grpc' | 'http-connect';
  let dialed: Duplex;
  try {
    dialed = await dialThroughProxy({
      mode,
      proxyHost: o.proxyHost,
      proxyPort: o.proxyPort,
      ...(o.proxyUds !== '' ? { proxyUds: o.proxyUds } : {}),
      ...pem,
      address: positionals[0]!,
      timeoutMs: o.dialTimeout,
      onEvent: o.verbose ? (e) => io.stderr.write(`${formatEvent(e)}\n`) : undefined,
    });
  } catch (err) {
    return fail(
      1,
      `failed to dial ${positionals[0]} through ${o.proxyUds || `${o.proxyHost}:${o.proxyPort}`}: ${(err as Error).message}`,
    );
  }

  const conn = dialed;
  return new Promise<number>((resolve) => {
    let failed: Error | undefined;
    conn.on('error', (err) => (failed = err));
    io.stdin.pipe(conn, { end: o.closeOnEof });
    conn.pipe(io.stdout, { end: false });
    conn.once('close', () => {
      io.stdin.unpipe(conn);
      io.stdin.pause();
      resolve(failed ? fail(1, failed.message) : 0);
    });
  });
}
