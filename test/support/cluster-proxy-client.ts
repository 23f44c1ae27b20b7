// Hub clients of the cluster-proxy suite, as cluster-proxy's users are, from the test process into the
// node cluster's network namespace (node-cluster.ts `startGateway`, netns-client.ts):
// - through the proxy-server's frontend (Service proxy-entrypoint:8090, gRPC, mTLS with the proxy-client
//   certificate cluster-proxy signs in its namespace), as its e2e's connectivity spec and its README's
//   test-client do, by our client (client/dial.ts) over a loopback port bridged into the namespace;
// - through the user-server (Service cluster-proxy-addon-user:9092, HTTPS, a bearer token), as its e2e's
//   service-proxy specs do.
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { dialThroughProxy } from '../../client/dial.js';
import { httpGet } from './http-over.js';
import { gatewaySocket } from './netns-client.js';
import { hubNamespace, managedCluster } from './ocm-hub.js';
import type { NodeCluster } from './node-cluster.js';

const secret = async (cluster: NodeCluster, name: string, key: string) =>
  Buffer.from(
    await cluster.kubectlOk([
      '-n',
      hubNamespace,
      'get',
      'secret',
      name,
      '-o',
      `jsonpath={.data.${key.replace(/\./g, '\\.')}}`,
    ]),
    'base64',
  );

const clusterIp = async (cluster: NodeCluster, service: string) =>
  (await cluster.kubectlOk(['-n', hubNamespace, 'get', 'service', service, '-o', 'jsonpath={.spec.clusterIP}'])).trim();

export interface HttpAnswer {
  status: number;
  body: string;
}

export class HubClients {
  private constructor(
    private readonly gateway: string,
    private readonly bridge: net.Server,
    private readonly bridgePort: number,
    private readonly tlsFiles: { ca: Buffer; cert: Buffer; key: Buffer },
    private readonly userServer: string,
    private readonly token: string,
  ) {}

  /** Reads cluster-proxy's CA and client certificate and a token of a service account `user` of the hub namespace; opens the bridge. */
  static async open(cluster: NodeCluster, gateway: string, user: string): Promise<HubClients> {
    const entry = `${await clusterIp(cluster, 'proxy-entrypoint')}:8090`;
    const bridge = net.createServer((c) => {
      const s = gatewaySocket(gateway, entry);
      c.on('error', () => s.destroy());
      s.on('error', () => c.destroy());
      c.pipe(s).pipe(c);
    });
    await new Promise<void>((resolve) => bridge.listen(0, '127.0.0.1', resolve));
    await cluster.kubectl(['-n', hubNamespace, 'create', 'serviceaccount', user]);
    const token = (await cluster.kubectlOk(['-n', hubNamespace, 'create', 'token', user, '--duration=24h'])).trim();
    return new HubClients(
      gateway,
      bridge,
      (bridge.address() as net.AddressInfo).port,
      {
        ca: await secret(cluster, 'proxy-server-ca', 'ca.crt'),
        cert: await secret(cluster, 'proxy-client', 'tls.crt'),
        key: await secret(cluster, 'proxy-client', 'tls.key'),
      },
      `${await clusterIp(cluster, 'cluster-proxy-addon-user')}:9092`,
      token,
    );
  }

  /** A connection to `address` (HOST:PORT on the managed cluster's side) through the proxy-server's frontend: the agent dials it. */
  dial(address: string, timeoutMs = 15_000): Promise<Duplex> {
    return dialThroughProxy({
      mode: 'grpc',
      proxyHost: '127.0.0.1',
      proxyPort: this.bridgePort,
      ...this.tlsFiles,
      address,
      timeoutMs,
    });
  }

  /** GET `path` over a connection made by dial, HTTP/1.1 written by hand (node:http wants a net.Socket); with `tlsTo`, TLS first (verification off, as cluster-proxy's README client does). */
  async get(address: string, path: string, opts: { tlsTo?: string; timeoutMs?: number } = {}): Promise<HttpAnswer> {
    let conn: Duplex = await this.dial(address, opts.timeoutMs);
    const host = address.replace(/:\d+$/, '');
    if (opts.tlsTo !== undefined)
      conn = await new Promise<tls.TLSSocket>((resolve, reject) => {
        const s = tls.connect(
          { socket: conn, servername: opts.tlsTo, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] },
          () => resolve(s),
        );
        s.once('error', reject);
      });
    return httpGet(conn, host, path, opts.timeoutMs ?? 15_000);
  }

  /** GET `path` on the user-server (`/<cluster>/...`), as a hub user with the token; verified against cluster-proxy's CA. */
  userServerGet(path: string, timeoutMs = 15_000): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const req = https.get(
        {
          createConnection: () =>
            tls.connect({
              socket: gatewaySocket(this.gateway, this.userServer),
              ca: this.tlsFiles.ca,
              servername: `cluster-proxy-addon-user.${hubNamespace}.svc`,
            }),
          path: `/${managedCluster}${path}`,
          headers: { authorization: `Bearer ${this.token}` },
          timeout: timeoutMs,
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
    });
  }

  close(): void {
    this.bridge.close();
  }
}
