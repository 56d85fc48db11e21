// The Statki API client: JSON in and out, the bearer token, RFC 9457 problems turned
// into ApiError (whose message is the problem's `detail`), and Idempotency-Key on every
// state-changing request so one retry after a network failure is safe.

import { problemText, t } from './i18n.js';

/** A refusal or failure, told in the reader's language from the problem's `code` (its `detail` as fallback). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problemText(problem) || (status ? t('error.status', { status }) : t('error.network')));
    this.status = status;
    this.code = problem ? problem.code : undefined;
    this.problem = problem;
  }
}

const TOKEN_KEY = 'statki.session';

/** The signed-in player ({id, name, token}) kept across reloads, or null. */
export function loadSession() {
  try {
    const session = JSON.parse(localStorage.getItem(TOKEN_KEY) || 'null');
    return session && session.token && session.id ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  if (session) localStorage.setItem(TOKEN_KEY, JSON.stringify(session));
  else localStorage.removeItem(TOKEN_KEY);
}

export class Api {
  constructor({ onUnauthorized } = {}) {
    this.session = loadSession();
    this.onUnauthorized = onUnauthorized || (() => {});
  }

  get token() {
    return this.session ? this.session.token : null;
  }

  headers(extra = {}) {
    const headers = { accept: 'application/json, application/problem+json', ...extra };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  async request(method, path, body) {
    const changes = method !== 'GET';
    const headers = this.headers(body === undefined ? {} : { 'content-type': 'application/json' });
    if (changes && method !== 'DELETE') headers['idempotency-key'] = crypto.randomUUID();
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      // The network failed before an answer: retrying with the same key is safe.
      try {
        response = await fetch(path, init);
      } catch {
        throw new ApiError(0, null);
      }
    }
    return this.answer(response);
  }

  async answer(response) {
    const text = await response.text();
    let json = null;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
    }
    if (!response.ok) {
      const problem = json && typeof json === 'object' ? json : null;
      if (response.status === 401 && this.token) this.onUnauthorized(problem);
      throw new ApiError(response.status, problem);
    }
    return json;
  }

  get(path) { return this.request('GET', path); }
  post(path, body) { return this.request('POST', path, body); }
  put(path, body) { return this.request('PUT', path, body); }
  delete(path) { return this.request('DELETE', path); }

  // --- accounts ---
  register(name, password) {
    const body = { name };
    if (password) body.password = password;
    return this.post('/v1/players', body);
  }
  login(name, password) { return this.post('/v1/sessions', { name, password }); }
  me() { return this.get('/v1/me'); }
  setPassword(password, currentPassword) {
    const body = { password };
    if (currentPassword) body.current_password = currentPassword;
    return this.put('/v1/me/password', body);
  }
  freshToken() { return this.post('/v1/me/token'); }
  revokeTokens() { return this.delete('/v1/me/tokens'); }

  // --- reading ---
  rulesets() { return this.get('/v1/rulesets'); }
  player(id) { return this.get(`/v1/players/${encodeURIComponent(id)}`); }
  /** A page of a player's matches; `cursor` is `{after}` (a page's `next`) or `{before}` (a time). */
  playerMatches(id, cursor = {}) {
    const query = new URLSearchParams(Object.entries(cursor).filter(([, value]) => value)).toString();
    return this.get(`/v1/players/${encodeURIComponent(id)}/matches${query ? `?${query}` : ''}`);
  }
  openMatches() { return this.get('/v1/matches?status=open'); }
  liveMatches() { return this.get('/v1/matches?status=live'); }
  ladder(ruleset, after) {
    const query = after ? `?after=${encodeURIComponent(after)}` : '';
    return this.get(`/v1/ladder/${encodeURIComponent(ruleset)}${query}`);
  }
  bots() { return this.get('/v1/bots'); }
  match(id) { return this.get(`/v1/matches/${id}`); }
  events(id, after) { return this.get(`/v1/matches/${id}/events?after=${after}`); }
  queue() { return this.get('/v1/queue'); }
  rematchState(id) { return this.get(`/v1/matches/${id}/rematch`); }

  // --- commands ---
  createMatch(body) { return this.post('/v1/matches', body); }
  join(id) { return this.post(`/v1/matches/${id}/join`); }
  placeShip(id, index, cell, orientation) {
    return this.put(`/v1/matches/${id}/ships/${index}`, { cell, orientation });
  }
  removeShip(id, index) { return this.delete(`/v1/matches/${id}/ships/${index}`); }
  placeFleet(id, ships) { return this.put(`/v1/matches/${id}/fleet`, { ships }); }
  shoot(id, cell) { return this.post(`/v1/matches/${id}/shots`, { cell }); }
  resign(id) { return this.post(`/v1/matches/${id}/resign`); }
  react(id, reaction) { return this.post(`/v1/matches/${id}/reactions`, { reaction }); }
  decline(id) { return this.post(`/v1/matches/${id}/decline`); }
  rematch(id) { return this.post(`/v1/matches/${id}/rematch`); }
  joinQueue(ruleset) { return this.post('/v1/queue', { ruleset }); }
  leaveQueue() { return this.delete('/v1/queue'); }
}
