// Loads a Node-API helper that cmd/build-native.ts compiled into build/, or undefined where it was not
// built (no compiler, another platform): each caller has its way to do without.
import { createRequire } from 'node:module';

const loaded = new Map<string, unknown>();

/** build/NAME.node, found from the sources (one folder down) or from the bundle (dist/cmd/). */
export function nativeAddon<T>(name: string): T | undefined {
  if (!loaded.has(name)) {
    const require = createRequire(import.meta.url);
    loaded.set(name, undefined);
    for (const candidate of [`../build/${name}.node`, `../../build/${name}.node`]) {
      try {
        loaded.set(name, require(candidate));
        break;
      } catch {
        // not built here, or built for another platform: try the next place
      }
    }
  }
  return loaded.get(name) as T | undefined;
}
