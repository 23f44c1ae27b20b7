// esbuild plugins for the agent's bundle (cmd/build.ts): what the bundle loads only when a run uses it.
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Plugin } from 'esbuild';

/**
 * What client-node's KubeConfig imports for kubeconfigs the agent rarely meets: a kubeconfig file at
 * all (js-yaml: in a pod the service account is read instead), an HTTP or SOCKS proxy (`proxy-url`),
 * the OIDC, Azure and GCP auth providers. Imported by config.js statically, they were evaluated in
 * every agent that reads a kubeconfig, with what the agent never calls (below), for an in-cluster
 * token and a CA (the cost: bench/README.md). Each becomes a chunk of its own,
 * loaded by kube/deferred-modules.ts before the kubeconfig is used when it needs one.
 */
const deferred = ['js-yaml', 'socks-proxy-agent', 'hpagent', 'openid-client', 'jsonpath-plus'];
/**
 * What config.js imports only for requests the agent does not make through it (generated API classes
 * and their models, undici's fetch and a SOCKS connector for it: kube/api-client.ts makes requests
 * with node:https instead). Not bundled: using one is an error that says so.
 */
const unbundled = ['undici', 'socks', './gen/index.js'];
const importers = /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/][^\\/]+\.js$/;

/** The names `importer` takes from `specifier`; each must be among `exported` when that is known. */
function namesImported(importerSource: string, specifier: string, exported: string[] | undefined): string[] {
  const quoted = specifier.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const statements = [
    ...importerSource.matchAll(new RegExp(`import\\s+([^;]+?)\\s+from\\s+['"]${quoted}['"]`, 'g')),
  ].map((m) => m[1]!);
  if (statements.length === 0) throw new Error(`deferred import of ${specifier}: no import statement found`);
  const names = new Set<string>();
  for (const clause of statements) {
    const namespace = /\*\s+as\s+(\w+)/.exec(clause)?.[1];
    if (namespace)
      for (const m of importerSource.matchAll(new RegExp(`\\b${namespace}\\.(\\w+)`, 'g'))) names.add(m[1]!);
    for (const m of (/\{([^}]*)\}/.exec(clause)?.[1] ?? '').split(',')) {
      const name = m.trim().split(/\s+as\s+/)[0];
      if (name) names.add(name);
    }
    if (/^\s*\w+\s*(,|$)/.test(clause)) names.add('default');
  }
  const missing = exported ? [...names].filter((n) => !exported.includes(n)) : [];
  if (missing.length) throw new Error(`deferred import of ${specifier}: ${missing.join(', ')} not exported by it`);
  return [...names];
}

export function deferClientNodeExtras(runtime: string): Plugin {
  return {
    name: 'defer-client-node-extras',
    setup(build) {
      build.onResolve(
        { filter: new RegExp(`^(${[...deferred, ...unbundled].map((d) => d.replace(/[./]/g, '\\$&')).join('|')})$`) },
        async (args) => {
          if (!importers.test(args.importer) || args.pluginData === 'real') return undefined;
          const real = await build.resolve(args.path, {
            kind: args.kind,
            resolveDir: args.resolveDir,
            pluginData: 'real',
          });
          if (real.errors.length) return { errors: real.errors };
          return {
            path: `${args.path} for ${args.importer}`,
            namespace: 'deferred',
            pluginData: { specifier: args.path, importer: args.importer, real: real.path },
          };
        },
      );
      build.onLoad({ filter: /.*/, namespace: 'deferred' }, async (args) => {
        const { specifier, importer, real } = args.pluginData as { specifier: string; importer: string; real: string };
        const inBundle = deferred.includes(specifier);
        // The real module's exports check the names, for what is bundled (the generated API is 60 MB to load).
        const exported = inBundle ? Object.keys(await import(pathToFileURL(real).href)) : undefined;
        const names = namesImported(readFileSync(importer, 'utf8'), specifier, exported);
        const local = (n: string) => `d_${n}`;
        const contents = [
          `import { deferModule, notLoaded } from ${JSON.stringify(runtime)};`,
          ...names.map(
            (n) => `let ${local(n)} = notLoaded(${JSON.stringify(specifier)}, ${JSON.stringify(n)}, ${inBundle});`,
          ),
          `export { ${names.map((n) => `${local(n)} as ${n}`).join(', ')} };`,
          inBundle
            ? `deferModule(${JSON.stringify(specifier)}, async () => { const m = await import(${JSON.stringify(real)}); ${names.map((n) => `${local(n)} = m.${n};`).join(' ')} });`
            : '',
        ].join('\n');
        return { contents, loader: 'js', resolveDir: dirname(real) };
      });
    },
  };
}

/**
 * `import http from 'node:http'` in an ES module (client-node does it) builds a namespace of every
 * export, and http's lazy WebSocket, CloseEvent and MessageEvent getters load Node's bundled undici
 * (the cost: bench/README.md). In the bundle such imports take the module from
 * process.getBuiltinModule, and only its plain (non-getter) exports.
 */
export function httpWithoutUndici(): Plugin {
  const modules = ['http', 'node:http'];
  return {
    name: 'http-without-undici',
    setup(build) {
      build.onResolve({ filter: /^(node:)?http$/ }, (args) =>
        modules.includes(args.path) ? { path: 'node:http', namespace: 'builtin-http' } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: 'builtin-http' }, () => {
        const http = process.getBuiltinModule('node:http');
        const plain = Object.keys(http).filter((k) => !Object.getOwnPropertyDescriptor(http, k)?.get);
        return {
          contents: `const http = process.getBuiltinModule('node:http');\nexport default http;\nexport const { ${plain.join(', ')} } = http;\n`,
          loader: 'js',
        };
      });
    },
  };
}
