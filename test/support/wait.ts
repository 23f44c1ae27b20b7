// Polling until a condition holds, with a deadline and an error that says what was awaited.

/**
 * Polls `condition` every `intervalMs` (what a measurement's resolution needs) until it holds. `what`
 * names what was awaited in the timeout's error; a function is read only then, so it can say what
 * the last look saw. An error `condition` throws ends the wait with it.
 */
export async function waitUntilAsync(
  condition: () => Promise<boolean>,
  timeoutMs: number,
  what: string | (() => string),
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The same for a condition read synchronously, every 20 ms. */
export function waitUntil(condition: () => boolean, timeoutMs: number, what: string | (() => string)): Promise<void> {
  return waitUntilAsync(async () => condition(), timeoutMs, what, 20);
}
