// A server-sent events reader over fetch (EventSource cannot send a bearer token): it
// parses text/event-stream, remembers the last event id and, after a dropped connection,
// reconnects with Last-Event-ID, so no event is missed or repeated. The typed port of the
// web client's web/js/sse.js.

/** One event as the stream framed it: `id:` (the event's `seq`), `event:` (its kind) and
 * `data:` parsed as JSON. */
export interface RawEvent {
  id: string | null;
  event: string;
  data: unknown;
}

export interface FollowOptions<T> {
  /** The bearer token, asked for on every (re)connect so a refreshed one is used. */
  token: () => string;
  /** Resume after this event id (`Last-Event-ID`); absent: from the stream's start. */
  lastEventId?: string | null;
  /** Turns an event's data into the caller's type; `undefined` skips the event. */
  decode: (event: RawEvent) => T | undefined;
  /** Each decoded event, in order. */
  onEvent: (event: T, raw: RawEvent) => void;
  onState?: (state: "open" | "retrying" | "ended") => void;
  /** A refusal retrying cannot fix (a 4xx other than 429); the stream stops. */
  onFatal?: (response: Response) => void;
  /** Milliseconds before the first retry, doubled per failure up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  fetch?: typeof fetch;
}

export interface Follower {
  /** Stops the stream; `done` then resolves. */
  close(): void;
  /** The id of the last event delivered (what a later `follow` may resume from). */
  lastEventId(): string | null;
  /** Settles when the stream ended (204: nothing more will come), failed fatally or was closed. */
  done: Promise<void>;
}

/** Follows the stream at `url` until it ends or `close()` is called. */
export function follow<T>(url: string, options: FollowOptions<T>): Follower {
  const controller = new AbortController();
  const fetcher = options.fetch ?? fetch;
  const backoff = options.backoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 10_000;
  let lastId: string | null = options.lastEventId ?? null;
  let closed = false;
  let failures = 0;

  function dispatch(event: RawEvent) {
    if (event.id !== null) lastId = event.id;
    const decoded = options.decode(event);
    if (decoded !== undefined) options.onEvent(decoded, event);
  }

  async function read(body: ReadableStream<Uint8Array>) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let data: string[] = [];
    let kind = "message";
    let id: string | null = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) dispatch({ id, event: kind, data: JSON.parse(data.join("\n")) });
          data = [];
          kind = "message";
          id = null;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "data") data.push(text);
        else if (field === "event") kind = text;
        else if (field === "id") id = text;
      }
    }
  }

  async function run() {
    while (!closed) {
      let waitMs = Math.min(maxBackoff, backoff * 2 ** failures);
      try {
        const headers: Record<string, string> = {
          accept: "text/event-stream",
          authorization: `Bearer ${options.token()}`,
        };
        if (lastId !== null) headers["last-event-id"] = lastId;
        const response = await fetcher(url, { headers, signal: controller.signal, cache: "no-store" });
        if (response.status === 204) {
          options.onState?.("ended");
          return;
        }
        if (!response.ok || response.body === null) {
          if (response.status !== 429 && response.status < 500) {
            options.onFatal?.(response);
            return;
          }
          const retryAfter = Number(response.headers.get("retry-after"));
          if (retryAfter > 0) waitMs = retryAfter * 1000;
          throw new Error(`the stream answered ${response.status}`);
        }
        failures = 0;
        options.onState?.("open");
        await read(response.body);
        // The server closed the stream (a match stream ends with its match): reconnect at
        // once; a finished match then answers 204.
        waitMs = 0;
      } catch {
        if (closed) return;
        failures += 1;
      }
      if (closed) return;
      options.onState?.("retrying");
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  const done = run();
  return {
    close() {
      closed = true;
      controller.abort();
    },
    lastEventId: () => lastId,
    done,
  };
}
