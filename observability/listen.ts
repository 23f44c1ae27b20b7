// Listening and closing for the agent's HTTP(S) servers (health, the aggregated API): a bind error
// rejects instead of arriving later as an 'error' event, and close cuts keep-alive connections.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

export async function listenOn(server: http.Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host || undefined, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}

export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
