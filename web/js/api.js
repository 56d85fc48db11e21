// The Statki API client: JSON in and out, the bearer token, RFC 9457 problems turned
// into ApiError (whose message is the problem's `detail`), and Idempotency-Key on every
// state-changing request so one retry after a network failure is safe.
//
// Typed by the TypeScript client package's types, generated from openapi.yaml: the JSDoc
// below names them, and scripts/checks/20-typescript-client type-checks this file, so a
// request body or an answer that drifts from the document fails CI.
// @ts-check

/** @typedef {import('../../clients/typescript/src/schema.js').components['schemas']} Schemas */

import { problemText, t } from './i18n.js';

/** A refusal or failure, told in the reader's language from the problem's `code` (its `detail` as fallback). */
export class ApiError extends Error {
  /**
   * @param {number} status 0 when no answer came @param {Schemas['Problem'] | null} problem
   * @param {number | null} [retryAfter] seconds to wait, from a 429's `Retry-After` (or `RateLimit`'s `t=`)
   */
  constructor(status, problem, retryAfter = null) {
    super(retryAfter !== null && (status === 429 || (problem && problem.code === 'rate_limited'))
      ? t('problem.rate_limited_wait', { seconds: String(Math.max(1, Math.ceil(retryAfter))) })
      : problemText(problem) || (status ? t('error.status', { status }) : t('error.network')));
    this.retryAfter = retryAfter;
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

/** @param {Schemas['Session'] | null} session */
export function saveSession(session) {
  if (session) localStorage.setItem(TOKEN_KEY, JSON.stringify(session));
  else localStorage.removeItem(TOKEN_KEY);
}

/**
 * How long a refused (429) request should wait, in seconds: `Retry-After`, else the
 * `t=` of the `RateLimit` header, else null.
 * @param {Headers} headers
 * @returns {number | null}
 */
function retryAfter(headers) {
  const header = headers.get('retry-after');
  if (header && /^\d+$/.test(header.trim())) return Number(header.trim());
  const limit = /;\s*t=(\d+)/.exec(headers.get('ratelimit') || '');
  return limit ? Number(limit[1]) : null;
}

export class Api {
  /** @param {{ onUnauthorized?: (problem: Schemas['Problem'] | null) => void }} [options] */
  constructor({ onUnauthorized } = {}) {
    this.session = loadSession();
    this.onUnauthorized = onUnauthorized || (() => {});
  }

  get token() {
    return this.session ? this.session.token : null;
  }

  /** @param {Record<string, string>} [extra] */
  headers(extra = {}) {
    /** @type {Record<string, string>} */
    const headers = { accept: 'application/json, application/problem+json', ...extra };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  /**
   * @param {'GET' | 'POST' | 'PUT' | 'DELETE'} method
   * @param {string} path
   * @param {unknown} [body]
   * @returns {Promise<any>} the answer's JSON; each method below names its schema
   */
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

  /** @param {Response} response */
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
      throw new ApiError(response.status, problem, response.status === 429 ? retryAfter(response.headers) : null);
    }
    return json;
  }

  /** @param {string} path */
  get(path) { return this.request('GET', path); }
  /** @param {string} path @param {unknown} [body] */
  post(path, body) { return this.request('POST', path, body); }
  /** @param {string} path @param {unknown} body */
  put(path, body) { return this.request('PUT', path, body); }
  /** @param {string} path */
  delete(path) { return this.request('DELETE', path); }

  // --- accounts ---
  /**
   * @param {string} name @param {string} [password]
   * @returns {Promise<Schemas['Session']>}
   */
  register(name, password) {
    /** @type {Schemas['NewPlayer']} */
    const body = { name };
    if (password) body.password = password;
    return this.post('/v1/players', body);
  }
  /**
   * @param {string} name @param {string} password
   * @returns {Promise<Schemas['Session']>}
   */
  login(name, password) {
    /** @type {Schemas['LogIn']} */
    const body = { name, password };
    return this.post('/v1/sessions', body);
  }
  /** @returns {Promise<Schemas['Me']>} */
  me() { return this.get('/v1/me'); }
  /** @param {string} password @param {string} [currentPassword] */
  setPassword(password, currentPassword) {
    /** @type {Schemas['NewPassword']} */
    const body = { password };
    if (currentPassword) body.current_password = currentPassword;
    return this.put('/v1/me/password', body);
  }
  /** @returns {Promise<Schemas['Session']>} */
  freshToken() { return this.post('/v1/me/token'); }
  /** @returns {Promise<Schemas['Session']>} */
  revokeTokens() { return this.delete('/v1/me/tokens'); }

  // --- reading ---
  /** @returns {Promise<Schemas['RuleSets']>} */
  rulesets() { return this.get('/v1/rulesets'); }
  /** @param {string} id @returns {Promise<Schemas['PlayerProfile']>} */
  player(id) { return this.get(`/v1/players/${encodeURIComponent(id)}`); }
  /**
   * A page of a player's matches; `cursor.after` is a page's `next`.
   * @param {string} id @param {{ after?: string | null }} [cursor]
   * @returns {Promise<Schemas['MatchPage']>}
   */
  playerMatches(id, cursor = {}) {
    const query = cursor.after ? `?after=${encodeURIComponent(cursor.after)}` : '';
    return this.get(`/v1/players/${encodeURIComponent(id)}/matches${query}`);
  }
  /** @returns {Promise<Schemas['MatchPage']>} */
  openMatches() { return this.get('/v1/matches?status=open'); }
  /** @returns {Promise<Schemas['MatchPage']>} */
  liveMatches() { return this.get('/v1/matches?status=live'); }
  /**
   * @param {Schemas['RuleSetId']} ruleset @param {string} [after]
   * @returns {Promise<Schemas['LadderPage']>}
   */
  ladder(ruleset, after) {
    const query = after ? `?after=${encodeURIComponent(after)}` : '';
    return this.get(`/v1/ladder/${encodeURIComponent(ruleset)}${query}`);
  }
  /** @returns {Promise<Schemas['BotProfile'][]>} */
  bots() { return this.get('/v1/bots'); }
  /** @param {string} id @returns {Promise<Schemas['MatchResource']>} */
  match(id) { return this.get(`/v1/matches/${id}`); }
  /** @param {string} id @param {number} after @returns {Promise<Schemas['EventResource'][]>} */
  events(id, after) { return this.get(`/v1/matches/${id}/events?after=${after}`); }
  /** @returns {Promise<Schemas['QueueState']>} */
  queue() { return this.get('/v1/queue'); }
  /** @param {string} id @returns {Promise<Schemas['RematchState']>} */
  rematchState(id) { return this.get(`/v1/matches/${id}/rematch`); }

  // --- commands ---
  /** @param {Schemas['NewMatch']} body @returns {Promise<Schemas['MatchUpdate']>} */
  createMatch(body) { return this.post('/v1/matches', body); }
  /** @param {string} id @returns {Promise<Schemas['MatchUpdate']>} */
  join(id) { return this.post(`/v1/matches/${id}/join`); }
  /**
   * @param {string} id @param {number} index @param {string} cell
   * @param {Schemas['Orientation']} orientation
   * @returns {Promise<Schemas['MatchUpdate']>}
   */
  placeShip(id, index, cell, orientation) {
    /** @type {Schemas['ShipPosition']} */
    const body = { cell, orientation };
    return this.put(`/v1/matches/${id}/ships/${index}`, body);
  }
  /** @param {string} id @param {number} index @returns {Promise<Schemas['MatchUpdate']>} */
  removeShip(id, index) { return this.delete(`/v1/matches/${id}/ships/${index}`); }
  /**
   * @param {string} id @param {Schemas['FleetRequest']['ships']} ships
   * @returns {Promise<Schemas['MatchUpdate']>}
   */
  placeFleet(id, ships) {
    /** @type {Schemas['FleetRequest']} */
    const body = { ships };
    return this.put(`/v1/matches/${id}/fleet`, body);
  }
  /** @param {string} id @param {string} cell @returns {Promise<Schemas['ShotAnswer']>} */
  shoot(id, cell) {
    /** @type {Schemas['ShotRequest']} */
    const body = { cell };
    return this.post(`/v1/matches/${id}/shots`, body);
  }
  /** @param {string} id @returns {Promise<Schemas['MatchUpdate']>} */
  resign(id) { return this.post(`/v1/matches/${id}/resign`); }
  /**
   * @param {string} id @param {Schemas['Reaction']} reaction
   * @returns {Promise<Schemas['MatchUpdate']>}
   */
  react(id, reaction) {
    /** @type {Schemas['ReactionRequest']} */
    const body = { reaction };
    return this.post(`/v1/matches/${id}/reactions`, body);
  }
  /** @param {string} id @returns {Promise<Schemas['SpectatorUpdate']>} */
  decline(id) { return this.post(`/v1/matches/${id}/decline`); }
  /** @param {string} id @returns {Promise<Schemas['RematchState']>} */
  rematch(id) { return this.post(`/v1/matches/${id}/rematch`); }
  /** @param {Schemas['RuleSetId']} ruleset @returns {Promise<Schemas['QueueState']>} */
  joinQueue(ruleset) {
    /** @type {Schemas['QueueRequest']} */
    const body = { ruleset };
    return this.post('/v1/queue', body);
  }
  /** @returns {Promise<Schemas['QueueState']>} */
  leaveQueue() { return this.delete('/v1/queue'); }
}
