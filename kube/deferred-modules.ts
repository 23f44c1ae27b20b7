// Modules of client-node's KubeConfig that the agent's bundle loads only when a kubeconfig needs them
// (cmd/bundle-plugins.ts makes each a chunk of its own and registers it here). From source (tsx, the
// tests) nothing is registered: Node has loaded them with KubeConfig, and loading is a no-op.
const loaders = new Map<string, Array<() => Promise<void>>>();

/** @public for the module cmd/bundle-plugins.ts generates, which registers each deferred chunk. */
export function deferModule(specifier: string, load: () => Promise<void>): void {
  const list = loaders.get(specifier) ?? [];
  list.push(load);
  loaders.set(specifier, list);
}

/**
 * What a deferred export is until its module is loaded (or for good, if it is not bundled): a clear
 * failure, never a silent one.
 * @public for the module cmd/bundle-plugins.ts generates.
 */
export function notLoaded(specifier: string, name: string, bundled: boolean): () => never {
  return () => {
    throw new Error(
      bundled
        ? `${specifier} (${name}) is used by this kubeconfig but was not loaded: kube/config.ts optionalModules() must name it`
        : `${specifier} (${name}) is not in the agent's bundle: spoke-agent makes its requests with node:https (kube/api-client.ts, cmd/bundle-plugins.ts)`,
    );
  };
}

/** Loads the deferred modules `specifiers` names (those not deferred in this build are ignored). */
export async function loadDeferredModules(specifiers: readonly string[]): Promise<void> {
  await Promise.all(specifiers.flatMap((s) => loaders.get(s) ?? []).map((load) => load()));
}
