// The service worker: the shell (the page, its script modules, style and icons) and the
// replays of finished matches work offline; nothing of a live match is ever kept, so
// nothing stale is shown for one. Served at /sw.js so its scope is the whole site.
//
// Every request it answers goes to the network first (the server revalidates with ETags,
// so a new binary is picked up at once); the cache is only the fallback when the network
// fails. Streams, commands and every other API call pass through untouched.

const SHELL = 'statki-shell-v1';
const REPLAYS = 'statki-replays-v1';
const SHELL_FILES = [
  '/', '/app/style.css', '/app/icon.svg', '/app/manifest.webmanifest',
  '/app/js/main.js', '/app/js/api.js', '/app/js/sse.js', '/app/js/i18n.js', '/app/js/dom.js', '/app/js/board.js',
  '/app/js/cells.js', '/app/js/commit.js', '/app/js/names.js', '/app/js/alerts.js', '/app/js/ships.js', '/app/js/botgames.js',
  '/app/js/views/auth.js', '/app/js/views/lobby.js', '/app/js/views/match.js', '/app/js/views/replay.js',
  '/app/js/views/ladder.js', '/app/js/views/profile.js', '/app/icon-192.png', '/app/icon-512.png',
  // The presets, which every match and replay page reads first.
  '/v1/rulesets',
];
// Same for every player and changing only with a deployment: kept for offline use.
const STATIC_API = new Set(['/v1/rulesets', '/v1/bots', '/openapi.yaml']);
const MATCH = /^\/v1\/matches\/([0-9a-f-]{36})(\/events)?$/;
const PLAYER = /^\/v1\/players\/[0-9a-f-]{36}$/;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(SHELL_FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((key) => key !== SHELL && key !== REPLAYS).map((key) => caches.delete(key))))
    .then(() => self.clients.claim()));
});

// The page asks for the kept answers to be dropped when its player signs out.
self.addEventListener('message', (event) => {
  if (event.data === 'forget') event.waitUntil(caches.delete(REPLAYS));
});

/** The network's answer, kept in `cacheName` when `keep(response)` says so; the kept one when the network fails. */
async function networkFirst(request, cacheName, keep) {
  const cache = await caches.open(cacheName);
  try {
    const response = await fetch(request);
    if (response.ok && (await keep(response.clone()))) await cache.put(request, response.clone());
    return response;
  } catch (error) {
    const kept = await cache.match(request, { ignoreVary: true });
    if (kept) return kept;
    throw error;
  }
}

/** Whether `id` is a match seen over (finished or cancelled): only such matches are kept. */
async function seenOver(id) {
  const cache = await caches.open(REPLAYS);
  const kept = await cache.match(`/v1/matches/${id}`, { ignoreVary: true });
  return Boolean(kept);
}

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  const path = url.pathname;
  if (path === '/' || path.startsWith('/app/')) {
    event.respondWith(networkFirst(request, SHELL, () => true));
    return;
  }
  if (STATIC_API.has(path) || PLAYER.test(path)) {
    event.respondWith(networkFirst(request, SHELL, () => true));
    return;
  }
  const match = MATCH.exec(path);
  if (!match) return;
  const [, id, events] = match;
  if (events) {
    // The events of a match over never change: kept for its replay.
    event.respondWith(networkFirst(request, REPLAYS, async (response) => {
      if (await seenOver(id)) return true;
      const list = await response.json().catch(() => null);
      const entries = Array.isArray(list) ? list : (list && list.events) || [];
      return entries.some((entry) => entry.kind === 'match_finished' || entry.kind === 'match_cancelled');
    }));
    return;
  }
  event.respondWith((async () => {
    try {
      const response = await fetch(request);
      if (response.ok) {
        const view = await response.clone().json().catch(() => null);
        const cache = await caches.open(REPLAYS);
        if (view && (view.phase === 'finished' || view.phase === 'cancelled')) await cache.put(request, response.clone());
      }
      return response;
    } catch (error) {
      // Offline: a match seen over is shown from its kept view; a live one never is.
      const kept = await (await caches.open(REPLAYS)).match(request, { ignoreVary: true });
      if (kept) return kept;
      throw error;
    }
  })());
});
