#!/nodejs/bin/node
// Stand-in for cluster-proxy's own image (quay.io/open-cluster-management/cluster-proxy), which the node
// suite cannot pull: the two sidecars of its rendered proxy-agent pod, doing what the pod relies on
// (cluster-proxy cmd/addon-agent/main.go and pkg/serviceproxy), run by the distroless stand-in's Node.
// - /agent (addon-agent): serves :8888/healthz, the proxy-agent container's liveness probe, which fails
//   once when /etc/tls/tls.crt or tls.key change (the "certificates" check); polls localhost:8093/readyz,
//   the agent's readiness, before each lease renewal, and logs what it found.
// - /cluster-proxy service-proxy: HTTPS on :7443 with --cert/--key (the host the agent's hostAliases point
//   at 127.0.0.1), health on :8000 (/healthz, /readyz).
// It logs one line per event on stdout: `kubectl logs` is how the node suite reads it.
'use strict';
const { createHash } = require('node:crypto');
const { readFileSync } = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { basename } = require('node:path');

const log = (msg, fields = {}) => console.log(JSON.stringify({ time: Date.now(), msg, ...fields }));

function addonAgent() {
  const digest = () =>
    createHash('sha256')
      .update(readFileSync('/etc/tls/tls.crt'))
      .update(readFileSync('/etc/tls/tls.key'))
      .digest('hex');
  let certs = digest();
  let probes = 0;
  http
    .createServer((req, res) => {
      if (req.url !== '/healthz') return res.writeHead(404).end();
      const now = digest();
      probes++;
      // As addon-framework's config checker: fail once on a change, then report healthy with the new files.
      const changed = now !== certs;
      certs = now;
      log('healthz', { probes, certificatesChanged: changed });
      res.writeHead(changed ? 500 : 200).end(changed ? 'certificates changed\n' : 'ok');
    })
    .listen(8888);
  let lastReady;
  const renew = () => {
    const req = http.get('http://localhost:8093/readyz', { timeout: 2000 }, (res) => {
      res.resume();
      const ready = res.statusCode === 200;
      if (ready !== lastReady)
        log(ready ? 'proxy-agent ready: lease renewed' : 'proxy-agent not ready: lease not renewed', {
          status: res.statusCode,
        });
      lastReady = ready;
    });
    req.on('timeout', () => req.destroy());
    req.on('error', (err) => {
      if (lastReady !== false) log('proxy-agent not ready: lease not renewed', { error: err.message });
      lastReady = false;
    });
  };
  renew();
  setInterval(renew, 2000);
  log('addon-agent stand-in listening', { port: 8888 });
}

function serviceProxy(args) {
  const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  https
    .createServer({ cert: readFileSync(flag('cert')), key: readFileSync(flag('key')) }, (req, res) => {
      log('service-proxy request', { url: req.url });
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`service-proxy stand-in: ${req.url}\n`);
    })
    .listen(7443);
  http
    .createServer((req, res) => res.writeHead(req.url === '/healthz' || req.url === '/readyz' ? 200 : 404).end('ok'))
    .listen(8000);
  log('service-proxy stand-in listening', { port: 7443 });
}

const command = basename(process.argv[1]);
if (command === 'agent') addonAgent();
else if (command === 'cluster-proxy' && process.argv[2] === 'service-proxy') serviceProxy(process.argv.slice(3));
else {
  console.error(`cluster-proxy stand-in: unknown command ${command} ${process.argv.slice(2).join(' ')}`);
  process.exit(2);
}
process.on('SIGTERM', () => process.exit(0));
