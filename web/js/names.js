// Player names by id. Views name players by id; the name comes from the player's
// public profile, asked once per id and kept for the page's life.

import { h } from './dom.js';

const known = new Map();
let api = null;

export function useApi(client) {
  api = client;
}

export function remember(id, name) {
  if (id && name) known.set(id, Promise.resolve(name));
}

/** Keeps the names a view or list entry carries (`names`: id → name), where the server sends them. */
export function rememberNames(resource) {
  if (resource && resource.names && typeof resource.names === 'object') {
    for (const [id, name] of Object.entries(resource.names)) remember(id, name);
  }
}

export function nameOf(id) {
  if (!id) return Promise.resolve('?');
  if (!known.has(id)) {
    known.set(id, api.player(id).then((player) => player.name).catch(() => id.slice(0, 8)));
  }
  return known.get(id);
}

/** A link to the player's profile showing their name once known. */
export function playerLink(id, { link = true } = {}) {
  const el = link ? h('a', { href: `#/p/${id}`, class: 'player' }, '…') : h('span', { class: 'player' }, '…');
  nameOf(id).then((name) => { el.textContent = name; });
  return el;
}

const profiles = new Map();

/** The player's rating on `ruleset`'s ladder from their public profile, or null (bots, no games). */
export function ratingOf(id, ruleset) {
  if (!id) return Promise.resolve(null);
  if (!profiles.has(id)) profiles.set(id, api.player(id).catch(() => null));
  return profiles.get(id).then((player) => {
    const entry = player && (player.ladders || []).find((ladder) => ladder.ruleset === ruleset);
    return entry && typeof entry.rating === 'number' ? entry.rating : null;
  });
}

/** Forgets the kept profile of `id`, so the next rating read is fresh (after a ranked result). */
export function forgetProfile(id) {
  profiles.delete(id);
}
