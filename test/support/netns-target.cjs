// The cluster's target inside a test's network namespace: an HTTP server the hub's client fetches
// through the tunnel. GET /page answers a short page; GET /bytes/N streams N bytes (a download).
// Usage: node netns-target.cjs PORT
'use strict';
const http = require('node:http');

const block = Buffer.alloc(256 * 1024, 'x');
const server = http.createServer((req, res) => {
  const bytes = /^\/bytes\/(\d+)$/.exec(req.url ?? '');
  if (!bytes) {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('spoke-nf page\n');
    return;
  }
  let left = Number(bytes[1]);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
  const pump = () => {
    while (left > 0) {
      const n = Math.min(left, block.length);
      left -= n;
      if (!res.write(n === block.length ? block : block.subarray(0, n))) return res.once('drain', pump);
    }
    res.end();
  };
  pump();
});
server.listen(Number(process.argv[2]), '127.0.0.1', () => console.log('target ready'));
