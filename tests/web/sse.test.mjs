// The browser's SSE reader (web/js/sse.js) against a scripted server: it parses events,
// reconnects after a dropped connection with Last-Event-ID, misses and repeats nothing,
// honours Retry-After on 429, and stops on 204 and on a refusal.
// Usage: node --test tests/web/sse.test.mjs

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { follow } from '../../web/js/sse.js';

/** A server whose n-th connection is answered by `script[n](request, response)`. */
async function scripted(script) {
  const seen = [];
  const server = createServer((request, response) => {
    seen.push({ lastEventId: request.headers['last-event-id'] ?? null, authorization: request.headers.authorization });
    const step = script[Math.min(seen.length - 1, script.length - 1)];
    step(request, response);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/stream`, seen, close: () => server.close() };
}

const sse = (response) => response.writeHead(200, { 'content-type': 'text/event-stream' });
const event = (id, kind, data) => `id: ${id}\nevent: ${kind}\ndata: ${JSON.stringify(data)}\n\n`;

function collect(url, until) {
  return new Promise((resolve, reject) => {
    const events = [];
    const states = [];
    const timer = setTimeout(() => { reader.close(); reject(new Error(`timed out with ${JSON.stringify(events)}`)); }, 8000);
    const reader = follow(url, {
      token: () => 'secret',
      lastEventId: 0,
      onEvent: (item) => {
        events.push(item);
        if (until(events)) { clearTimeout(timer); reader.close(); resolve({ events, states }); }
      },
      onState: (state) => {
        states.push(state);
        if (state === 'ended') { clearTimeout(timer); resolve({ events, states }); }
      },
      onFatal: (response) => { clearTimeout(timer); resolve({ events, states, fatal: response.status }); },
    });
  });
}

test('a dropped stream resumes after the last event, with nothing missed or repeated', async () => {
  const server = await scripted([
    (request, response) => {
      sse(response);
      // A comment, an event split across writes, then the connection drops.
      response.write(': keep-alive\n\n');
      response.write(event(1, 'shot_fired', { seq: 1 }));
      response.write('id: 2\nevent: shot_fi');
      setTimeout(() => { response.write(`red\ndata: {"seq":2}\n\n`); setTimeout(() => response.destroy(), 20); }, 20);
    },
    (request, response) => {
      sse(response);
      response.end(event(3, 'shot_fired', { seq: 3 }) + event(4, 'match_finished', { seq: 4 }));
    },
    (request, response) => { response.writeHead(204); response.end(); },
  ]);
  try {
    const { events, states } = await collect(server.url, () => false);
    assert.deepEqual(events.map((item) => item.data.seq), [1, 2, 3, 4]);
    assert.equal(events[1].event, 'shot_fired');
    assert.deepEqual(server.seen.map((request) => request.lastEventId), ['0', '2', '4']);
    assert.ok(server.seen.every((request) => request.authorization === 'Bearer secret'));
    assert.equal(states.at(-1), 'ended');
  } finally {
    server.close();
  }
});

test('429 waits for Retry-After and tries again; a 4xx refusal stops', async () => {
  const busy = await scripted([
    (request, response) => { response.writeHead(429, { 'retry-after': '1' }); response.end('{}'); },
    (request, response) => { sse(response); response.end(event(7, 'challenge', { seq: 7 })); },
  ]);
  try {
    const started = Date.now();
    const { events } = await collect(busy.url, (items) => items.length === 1);
    assert.equal(events[0].data.seq, 7);
    assert.ok(Date.now() - started >= 900, 'waited for Retry-After');
  } finally {
    busy.close();
  }
  const refused = await scripted([(request, response) => { response.writeHead(404); response.end('{}'); }]);
  try {
    const { fatal } = await collect(refused.url, () => false);
    assert.equal(fatal, 404);
    assert.equal(refused.seen.length, 1);
  } finally {
    refused.close();
  }
});
