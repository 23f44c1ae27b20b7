// What the agent's health server said when it refused a /debug request, for `resolve` and `queries`.

/** The `error` of the answer's JSON, else its text (a guard's plain-text 401 or 403); undefined when empty. */
export function refusalReason(body: string): string | undefined {
  try {
    const error = (JSON.parse(body) as { error?: unknown } | null)?.error;
    if (typeof error === 'string') return error;
  } catch {
    // not JSON
  }
  return body.trim() || undefined;
}
