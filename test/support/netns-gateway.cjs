// Runs inside a test's network namespace: the harness (outside it) reaches TCP ports in there through
// this process's Unix socket, which lives in the file system and so is shared across namespaces. A
// client writes "HOST:PORT\n", then the connection is piped to that address. Plain Node, no loader:
// it starts in tens of milliseconds. Usage: node netns-gateway.cjs SOCKET_PATH
'use strict';
const net = require('node:net');

const server = net.createServer((client) => {
  client.on('error', () => {});
  let head = Buffer.alloc(0);
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(10);
    if (nl < 0) return;
    client.off('data', onData);
    client.pause();
    const target = head.subarray(0, nl).toString();
    const rest = head.subarray(nl + 1);
    const colon = target.lastIndexOf(':');
    const upstream = net.connect({ host: target.slice(0, colon), port: Number(target.slice(colon + 1)) });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    upstream.once('connect', () => {
      if (rest.length) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  };
  client.on('data', onData);
});
server.listen(process.argv[2], () => console.log('gateway ready'));
