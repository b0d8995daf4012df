// Server-Sent Events: the daemon sends `event: <name>` and one `data: <json>` line per event,
// comment lines (`:`) as keep-alives, and a blank line after each event.

/** One Server-Sent Event. */
export interface SseEvent {
  event: string;
  data: string;
}

/** Parses a byte stream into events; a trailing event without its blank line is dropped. */
export async function* parseSse(chunks: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let sawData = false;

  const line = function* (l: string): Generator<SseEvent> {
    if (l === '') {
      if (sawData) yield { event: event || 'message', data: data.join('\n') };
      event = '';
      data = [];
      sawData = false;
      return;
    }
    if (l.startsWith(':')) return;
    const colon = l.indexOf(':');
    const field = colon === -1 ? l : l.slice(0, colon);
    let value = colon === -1 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') {
      data.push(value);
      sawData = true;
    }
    // `id` and `retry` are not used by the daemon
  };

  for await (const chunk of chunks) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.search(/\r\n|\r|\n/)) !== -1) {
      // a lone \r at the very end may be the first half of \r\n: wait for more
      if (buffer[nl] === '\r' && nl === buffer.length - 1) break;
      const l = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
      yield* line(l);
    }
  }
  buffer += decoder.decode();
  if (buffer.length > 0) {
    for (const l of buffer.split(/\r\n|\r|\n/)) yield* line(l);
  }
}
