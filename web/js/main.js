// The application shell: session, hash routes, the player's own live feed (challenges,
// pairings, rematch offers), toasts, language switch, and which optional API features
// this server offers (read from its OpenAPI document, so absent ones are hidden).

import { Api, saveSession } from './api.js';
import { h, mount } from './dom.js';
import { currentLanguage, languages, rulesetTitle, setLanguage, t } from './i18n.js';
import { follow } from './sse.js';
import { alertControls, watchTurns } from './alerts.js';
import { nameOf, remember, rememberNames, useApi } from './names.js';
import * as auth from './views/auth.js';
import * as lobby from './views/lobby.js';

// The sign-in page and the lobby come with the shell; the other screens are loaded when
// first opened, so the lobby's first load stays small.
const matchView = () => import('./views/match.js');
const replay = () => import('./views/replay.js');
const ladder = () => import('./views/ladder.js');
const profile = () => import('./views/profile.js');

// A notice is toasted only when it happened after this page opened (less a little slack
// for a notice racing the page's start): pending notices replayed by the feed on connect
// are old news, and the lobby lists what still matters (challenges, matches to resume).
const PAGE_OPENED = Date.now();
const NOTICE_SLACK_MS = 5000;
const THEME_KEY = 'statki.theme';
const THEMES = ['auto', 'light', 'dark'];

/** The saved theme: 'light' or 'dark' as chosen, else 'auto' (the system's `prefers-color-scheme`). */
function savedTheme() {
  const saved = localStorage.getItem(THEME_KEY);
  return THEMES.includes(saved) ? saved : 'auto';
}

function applyTheme(theme) {
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

class App {
  constructor() {
    this.api = new Api({ onUnauthorized: () => this.signOut(t('auth.expired')) });
    useApi(this.api);
    this.main = document.getElementById('main');
    this.features = { sessions: false, password: false, bots: false, live: true };
    this.featuresPromise = null;
    this.routeToken = null;
    this.noticeListeners = new Set();
    this.cleanup = null;
    this.feed = null;
    this.rulesetsPromise = null;
    this.turns = null;
    this.turnsWaiting = new Set();
    this.pageTurn = false;
    this.toasted = new Set();
  }

  /** The tab's title: marked while any match (the one on screen or another) waits for the player's shot. */
  updateTitle() {
    const waiting = this.pageTurn || this.turnsWaiting.size > 0;
    document.title = waiting ? `▶ ${t('title.your_turn')} · Statki` : 'Statki';
  }

  async start() {
    // Installable, and the shell and replays work offline (web/sw.js keeps nothing of a live match).
    if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
    document.documentElement.lang = currentLanguage();
    applyTheme(savedTheme());
    // A link followed from the phone's open menu has done its job: the menu folds again.
    window.addEventListener('hashchange', () => { this.foldMenu(); this.route(); });
    if (this.api.session) {
      this.startFeed();
      // Tokens last 30 days: a visit renews the kept one (a server without sessions refuses; kept as is).
      this.api.freshToken().then((fresh) => this.replaceToken(fresh)).catch(() => {});
    }
    this.route();
  }

  /**
   * Which optional parts this server offers, read from its OpenAPI document once and only
   * where a page needs to know (sign-in, the own profile): a signed-in player's lobby loads
   * without it.
   */
  whenFeatures() {
    if (!this.featuresPromise) this.featuresPromise = this.detectFeatures();
    return this.featuresPromise;
  }

  async detectFeatures() {
    try {
      const response = await fetch('/openapi.yaml');
      const text = response.ok ? await response.text() : '';
      this.features.sessions = text.includes('/v1/sessions:');
      this.features.password = text.includes('/v1/me/password:');
      this.features.bots = text.includes('/v1/bots:');
    } catch {
      // Without the document the optional controls stay hidden.
    }
  }

  rulesets() {
    if (!this.rulesetsPromise) {
      this.rulesetsPromise = this.api.rulesets().then((answer) => answer.rulesets)
        .catch((error) => { this.rulesetsPromise = null; throw error; });
    }
    return this.rulesetsPromise;
  }

  get me() {
    return this.api.session;
  }

  signIn(session, { go = true } = {}) {
    this.api.session = session;
    saveSession(session);
    remember(session.id, session.name);
    this.startFeed();
    if (!go) return;
    this.navigate('#/');
    this.route();
  }

  /** Keeps a new token for the same player (a renewal, or after revoking the others). */
  replaceToken(session) {
    if (!session || !session.token || !this.me || session.id !== this.me.id) return;
    this.api.session = { ...this.me, token: session.token };
    saveSession(this.api.session);
  }

  signOut(message) {
    this.stopFeed();
    // What the service worker kept for this player's replays goes with the session.
    if (navigator.serviceWorker && navigator.serviceWorker.controller) navigator.serviceWorker.controller.postMessage('forget');
    this.api.session = null;
    saveSession(null);
    if (message) this.toast(message, { kind: 'error' });
    this.navigate('#/');
    this.route();
  }

  navigate(hash) {
    if (location.hash !== hash) location.hash = hash;
  }

  // --- the player's own feed ---
  feedKey() {
    return `statki.feed.${this.me.id}`;
  }

  startFeed() {
    this.stopFeed();
    this.turns = watchTurns(this);
    this.feed = follow('/v1/stream', {
      token: () => this.api.token,
      lastEventId: localStorage.getItem(this.feedKey()),
      onEvent: ({ id, data }) => {
        if (id !== null && this.me) localStorage.setItem(this.feedKey(), id);
        this.notice(data, id);
      },
    });
  }

  stopFeed() {
    if (this.feed) this.feed.close();
    this.feed = null;
    if (this.turns) this.turns.stop();
    this.turns = null;
    this.turnsWaiting = new Set();
    this.updateTitle();
  }

  notice(notice, id = null) {
    rememberNames(notice);
    for (const listener of this.noticeListeners) listener(notice);
    const fresh = Date.parse(notice.at) >= PAGE_OPENED - NOTICE_SLACK_MS;
    if (!fresh) return;
    if (id !== null) {
      if (this.toasted.has(id)) return;
      this.toasted.add(id);
    }
    if (this.turns) this.turns.poke();
    // The match page in front already shows what happens in its own match.
    const here = location.hash.startsWith(`#/m/${notice.match_id}`);
    if (here && notice.kind !== 'rematch_started' && notice.kind !== 'challenge_declined') return;
    const open = (id) => () => this.navigate(`#/m/${id}`);
    switch (notice.kind) {
      case 'challenge':
        this.toastWithPlayer('notice.challenge', notice.from, {
          ruleset: notice.ruleset,
          actions: [[t('notice.see'), open(notice.match_id)]],
        });
        break;
      case 'rematch_offered':
        this.toastWithPlayer('notice.rematch', notice.from, {
          actions: [[t('notice.see'), open(notice.match_id)]],
        });
        break;
      case 'paired':
      case 'rematch_started':
        this.toast(t(`notice.${notice.kind}`));
        this.navigate(`#/m/${notice.match_id}`);
        break;
      case 'challenge_declined':
        this.toastWithPlayer('notice.declined', notice.player, { actions: [[t('notice.see'), open(notice.match_id)]] });
        break;
      case 'opponent_joined':
        this.toast(t('notice.opponent_joined'), { actions: [[t('notice.see'), open(notice.match_id)]] });
        break;
      default:
        break;
    }
  }

  onNotice(listener) {
    this.noticeListeners.add(listener);
    return () => this.noticeListeners.delete(listener);
  }

  toastWithPlayer(key, playerId, { ruleset, actions }) {
    nameOf(playerId).then((name) => {
      this.toast(t(key, { name, ruleset: ruleset ? rulesetTitle(ruleset) : '' }), { actions });
    });
  }

  // --- messages ---
  toast(message, { kind = 'info', actions = [], timeout = 8000, testId = null } = {}) {
    const box = document.getElementById('toasts');
    const close = () => item.remove();
    const item = h('div', { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status', 'data-testid': testId },
      h('span', {}, message),
      actions.map(([label, run]) => h('button', { type: 'button', class: 'link', onclick: () => { run(); close(); } }, label)),
      h('button', { type: 'button', class: 'close', 'aria-label': t('close'), onclick: close }, '×'));
    box.append(item);
    if (timeout) setTimeout(close, timeout);
  }

  /** Shows a refusal: the problem's `detail`, never a raw error. */
  error(error) {
    this.toast(error && error.message ? error.message : t('error.network'), { kind: 'error' });
  }

  // --- routing ---
  route() {
    if (this.cleanup) this.cleanup();
    this.cleanup = null;
    this.renderChrome();
    // Shown from the first route on: the header has its final height by now, so nothing below it jumps.
    this.main.classList.remove('pending');
    const path = location.hash.replace(/^#/, '') || '/';
    const parts = path.split('?')[0].split('/').filter(Boolean);
    const query = new URLSearchParams(path.split('?')[1] || '');
    const token = {};
    this.routeToken = token;
    if (!this.me) {
      this.whenFeatures().then(() => {
        if (this.routeToken === token && !this.me) this.cleanup = auth.render(this, this.main);
      });
      return;
    }
    let screen;
    if (parts[0] === 'm' && parts[1] && parts[2] === 'replay') screen = replay().then((module) => () => module.render(this, this.main, parts[1]));
    else if (parts[0] === 'm' && parts[1]) screen = matchView().then((module) => () => module.render(this, this.main, parts[1]));
    else if (parts[0] === 'ladder') screen = ladder().then((module) => () => module.render(this, this.main, parts[1] || 'statki'));
    else if (parts[0] === 'p' && parts[1]) screen = profile().then((module) => () => module.render(this, this.main, parts[1]));
    else {
      this.cleanup = lobby.render(this, this.main, query) || null;
      this.main.focus({ preventScroll: true });
      return;
    }
    screen.then((view) => {
      // Another route may have begun while the screen's module loaded.
      if (this.routeToken !== token) return;
      this.cleanup = view() || null;
      this.main.focus({ preventScroll: true });
    }).catch(() => this.error(null));
  }

  foldMenu() {
    const toggle = document.getElementById('menu-toggle');
    if (!toggle || toggle.getAttribute('aria-expanded') !== 'true') return;
    toggle.setAttribute('aria-expanded', 'false');
    toggle.closest('.top').classList.remove('menu-open');
  }

  renderChrome() {
    const nav = document.getElementById('nav');
    const account = document.getElementById('account');
    const here = location.hash || '#/';
    const link = (href, label, active) => h('a', { href, 'aria-current': active ? 'page' : null }, label);
    mount(nav, this.me ? [
      link('#/', t('nav.lobby'), here === '#/' || here.startsWith('#/?')),
      link('#/ladder/statki', t('nav.ladder'), here.startsWith('#/ladder')),
      link(`#/p/${this.me.id}`, t('nav.profile'), here === `#/p/${this.me.id}`),
    ] : []);
    const switcher = h('select', {
      class: 'language', 'aria-label': t('language'),
      onchange: (event) => { setLanguage(event.target.value); document.documentElement.lang = event.target.value; this.route(); },
    }, languages.map(([code, label]) => h('option', { value: code, selected: code === currentLanguage() }, label)));
    const theme = h('select', {
      class: 'theme', 'aria-label': t('theme'), 'data-testid': 'theme',
      onchange: (event) => { localStorage.setItem(THEME_KEY, event.target.value); applyTheme(event.target.value); },
    }, THEMES.map((code) => h('option', { value: code, selected: code === savedTheme() }, t(`theme.${code}`))));
    // On a phone the account's controls fold behind one button, so the header stays two short rows.
    const toggle = document.getElementById('menu-toggle');
    toggle.textContent = t('menu');
    toggle.onclick = () => {
      const open = toggle.getAttribute('aria-expanded') !== 'true';
      toggle.setAttribute('aria-expanded', String(open));
      toggle.closest('.top').classList.toggle('menu-open', open);
    };
    mount(account,
      switcher,
      theme,
      this.me ? alertControls(this) : null,
      this.me ? [
        h('span', { class: 'me', 'data-testid': 'me' }, this.me.name),
        h('button', { type: 'button', class: 'secondary small', 'data-testid': 'logout', onclick: () => this.signOut() }, t('auth.logout')),
      ] : []);
  }
}

new App().start();
