// `spoke-agent dials`: its line for a change of a dial, and the command against a real /debug/dials
// (a health server on loopback over a dial log the test fills).
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Dial } from '../agent/dial.js';
import { DialLog } from '../agent/dial-log.js';
import { dialsHandler } from '../agent/dials-handler.js';
import { HealthServer } from '../observability/health-server.js';
import { localSocketPath } from '../observability/local-socket.js';
import { createLogger } from '../observability/log.js';
import { textOut } from '../test/support/text-out.js';
import { waitUntil } from '../test/support/wait.js';
import { dialHeader, dialLine, runDialsCommand } from './dials-command.js';

const open = {
  seq: 4,
  id: 4,
  resourceVersion: 'ab12cd34-4',
  objectName: 'ab12cd34-4',
  event: 'ADDED' as const,
  time: '2026-11-10T12:00:01.234Z',
  server: 'server-a',
  connectID: '7',
  destination: 'web.prod.cluster1:443',
  rule: '--expose=prod/web',
  address: '10.0.0.5',
  result: 'connected' as const,
  dialMs: 1.2,
  open: true,
  bytesToTarget: 0,
  bytesFromTarget: 0,
};

describe('dialLine', () => {
  it('prints time, result (open while connected), destination, address, rule, aligned under the header', () => {
    const line = dialLine(open);
    expect(line).toBe(
      '12:00:01.234Z open      web.prod.cluster1:443            10.0.0.5               --expose=prod/web - -',
    );
    for (const [column, value] of [
      ['RESULT', 'open'],
      ['DESTINATION', 'web.prod.cluster1'],
      ['ADDRESS', '10.0.0.5'],
      ['RULE', '--expose'],
    ])
      expect(dialHeader.indexOf(column!)).toBe(line.indexOf(value!));
  });

  it('adds bytes, duration and how it closed once closed, and the reason of a denial', () => {
    expect(
      dialLine({
        ...open,
        event: 'MODIFIED',
        open: false,
        bytesToTarget: 5,
        bytesFromTarget: 7,
        durationMs: 12.5,
        closedBy: 'CLOSE_REQ',
      }),
    ).toMatch(/ connected +web\.prod\.cluster1:443 +10\.0\.0\.5 +--expose=prod\/web 5\/7 12\.5ms CLOSE_REQ$/);
    const { rule: _, connectID: __, ...bare } = open;
    expect(
      dialLine({
        ...bare,
        open: false,
        result: 'denied',
        address: '169.254.169.254',
        destination: '169.254.169.254:80',
        reason: 'not allowed',
      }),
    ).toMatch(/ denied +169\.254\.169\.254:80 +169\.254\.169\.254 +- - - not allowed$/);
  });
});

describe('spoke-agent dials against /debug/dials', () => {
  it('lists the dials held (a field selector keeps the denials), then with -w follows a connect and its close', async () => {
    const log = new DialLog({ size: 8 });
    const record = (destination: string, fields: Partial<Dial>) =>
      Object.assign(new Dial(Date.now(), performance.now(), 'server-a', destination), fields);
    log.added(record('web.prod.cluster1:443', { connectID: '1', rule: '--expose=prod/web', address: '10.0.0.5' }));
    log.added(record('169.254.169.254:80', { result: 'denied', reason: 'not allowed', address: '169.254.169.254' }));
    const health = new HealthServer({
      host: '127.0.0.1',
      port: 0,
      registry: new Registry(),
      log: createLogger('silent'),
    });
    health.addRoute('/debug/dials', dialsHandler(log));
    const port = (await health.listen()).port;
    const printed = textOut();
    const { out } = printed;
    const controller = new AbortController();
    try {
      expect(await runDialsCommand([`--health-server-port=${port}`, '--field-selector=result=denied'], out)).toBe(0);
      expect(printed.text().split('\n').slice(0, 2)).toEqual([
        dialHeader,
        expect.stringMatching(/ denied +169\.254\.169\.254:80 +169\.254\.169\.254 +- - - not allowed$/),
      ]);
      printed.clear();
      const tail = runDialsCommand([`--health-server-port=${port}`, '-w', '--output=json'], out, controller.signal);
      await waitUntil(() => printed.text().split('\n').length > 2, 5000, 'the dials held');
      const open = record('db.prod.cluster1:5432', { connectID: '2', address: '10.0.0.6' });
      log.added(open);
      await waitUntil(
        () => printed.text().includes('"destination":"db.prod.cluster1:5432"'),
        5000,
        'the connect in the tail',
      );
      Object.assign(open, { bytesToTarget: 3, bytesFromTarget: 4, durationMs: 5, closedBy: 'remote EOF' });
      log.modified(open);
      await waitUntil(() => printed.text().includes('"event":"MODIFIED"'), 5000, 'the close in the tail');
      const lines = printed
        .text()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(
        lines.filter((l) => l.destination === 'db.prod.cluster1:5432').map((l) => [l.event, l.open, l.bytesFromTarget]),
      ).toEqual([
        ['ADDED', true, 0],
        ['MODIFIED', false, 4],
      ]);
      controller.abort();
      expect(await tail).toBe(0);
    } finally {
      controller.abort();
      await health.close();
    }
  });

  it.skipIf(process.platform !== 'linux')(
    "in the agent's pod, where /debug on the health port wants a token (cluster-proxy's pod), asks over the agent's local socket as resolve does",
    async () => {
      const log = new DialLog({ size: 8 });
      log.added(Object.assign(new Dial(Date.now(), performance.now(), 'server-a', 'loopback:443'), { connectID: '1' }));
      const health = new HealthServer({
        host: '127.0.0.1',
        port: 0,
        registry: new Registry(),
        log: createLogger('silent'),
      });
      const refuse = async (_: unknown, res: import('node:http').ServerResponse) => {
        res.writeHead(401).end('{"message":"Unauthorized: send a bearer token"}');
        return false;
      };
      health.addRoute('/debug/dials', dialsHandler(log), refuse);
      const port = (await health.listen()).port;
      const printed = textOut();
      try {
        expect(await runDialsCommand([`--health-server-port=${port}`, '--output=json'], printed.out)).toBe(1);
        await health.listenLocal(localSocketPath(port));
        printed.clear();
        expect(await runDialsCommand([`--health-server-port=${port}`, '--output=json'], printed.out)).toBe(0);
        expect(printed.text()).toContain('"destination":"loopback:443"');
      } finally {
        await health.close();
      }
    },
  );
});
