// A server-sent events reader over fetch, since EventSource cannot send the bearer
// token. It parses the text/event-stream format, remembers the last event id, and after a
// dropped connection reconnects with Last-Event-ID, so no event is missed or repeated.

const MAX_BACKOFF_MS = 10_000;

/**
 * Follows `url` until closed. `onEvent({id, event, data})` gets each event with `data`
 * parsed as JSON; `onState('open' | 'retrying' | 'ended')` tells the connection's state;
 * `onFatal(response)` gets a refusal that retrying cannot fix (4xx other than 429).
 */
export function follow(url, { token, lastEventId = null, onEvent, onState = () => {}, onFatal = () => {} }) {
  const controller = new AbortController();
  let lastId = lastEventId;
  let closed = false;
  let failures = 0;

  async function connect() {
    while (!closed) {
      let waitMs = Math.min(MAX_BACKOFF_MS, 500 * 2 ** failures);
      try {
        const headers = { accept: 'text/event-stream', authorization: `Bearer ${token()}` };
        if (lastId !== null && lastId !== undefined) headers['last-event-id'] = String(lastId);
        const response = await fetch(url, { headers, signal: controller.signal, cache: 'no-store' });
        if (response.status === 204) {
          onState('ended');
          return;
        }
        if (!response.ok) {
          if (response.status !== 429 && response.status < 500) {
            onFatal(response);
            return;
          }
          const retryAfter = Number(response.headers.get('retry-after'));
          if (retryAfter > 0) waitMs = retryAfter * 1000;
          throw new Error(`stream answered ${response.status}`);
        }
        failures = 0;
        onState('open');
        await read(response.body);
        // The server closed the stream (a match stream ends with the match): reconnect
        // at once; a finished match then answers 204.
        waitMs = 0;
      } catch (error) {
        if (closed) return;
        failures += 1;
      }
      if (closed) return;
      onState('retrying');
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  async function read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let event = { data: [], event: 'message', id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (event.data.length) dispatch(event);
          event = { data: [], event: 'message', id: null };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') event.data.push(value);
        else if (field === 'event') event.event = value;
        else if (field === 'id') event.id = value;
      }
    }
  }

  function dispatch(event) {
    if (event.id !== null) lastId = event.id;
    let data;
    try {
      data = JSON.parse(event.data.join('\n'));
    } catch {
      return;
    }
    onEvent({ id: event.id, event: event.event, data });
  }

  connect();
  return {
    close() {
      closed = true;
      controller.abort();
    },
    get lastEventId() {
      return lastId;
    },
  };
}
