import { describe, expect, it } from 'vitest';
import { dialErrorReply, dialErrorStatus } from './frontend-http-connect.js';

describe("Go's mapDialErrorToHTTPStatus", () => {
  it.each([
    ['dial tcp 10.0.0.1:80: i/o timeout', 504],
    ['context deadline exceeded', 504],
    ['dial tcp: lookup x on 10.96.0.10:53: read udp: i/o Timeout', 504],
    ['socket: too many open files', 503],
    ['dial tcp 127.0.0.1:9: connect: connection refused', 502],
    ['dial tcp: lookup nope.svc: no such host', 502],
    ['something else', 502],
  ])('%s -> %i', (error, status) => expect(dialErrorStatus(error)).toBe(status));
});

it('writes the dial error as http.Response.Write does: no length, so Connection: close', () => {
  expect(dialErrorReply('dial tcp 127.0.0.1:9: connect: connection refused')).toBe(
    'HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ndial tcp 127.0.0.1:9: connect: connection refused',
  );
});
