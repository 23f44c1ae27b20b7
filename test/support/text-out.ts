// A writable that keeps what a command prints, for commands that take their output stream.

export interface TextOut {
  out: NodeJS.WritableStream;
  /** What was written since the start, or the last clear(). */
  text(): string;
  clear(): void;
}

export function textOut(): TextOut {
  let text = '';
  const out = {
    write: (chunk: string) => {
      text += chunk;
      return true;
    },
  } as unknown as NodeJS.WritableStream;
  return {
    out,
    text: () => text,
    clear: () => {
      text = '';
    },
  };
}
