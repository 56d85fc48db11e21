// Never miss a turn: watches the signed-in player's unfinished matches from any page and
// says when it is their shot (tab title, a badge on the favicon, a toast, an optional
// sound, an opt-in browser notification), and tells a result reached while they were
// away when they come back. Sounds are synthesised with WebAudio; nothing is fetched.

import { h } from './dom.js';
import { t } from './i18n.js';
import { nameOf } from './names.js';

const POLL_MS = 3000;
const RESULT_TOAST_MS = 20_000;
const SOUND_KEY = 'statki.sound';
const NOTIFY_KEY = 'statki.notify';
const ICON = '/app/icon.svg';
// The icon with a red dot: a data: URL, which the page's image policy allows.
const BADGED_ICON = `data:image/svg+xml,${encodeURIComponent('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0b4f7c"/><path d="M5 19h22l-3 6H8z" fill="#f4f7fa"/><rect x="13" y="11" width="7" height="7" rx="1" fill="#f4f7fa"/><circle cx="24" cy="8" r="7.5" fill="#d62c1a" stroke="#fff" stroke-width="1.5"/></svg>')}`;

const live = (phase) => phase === 'placement' || phase === 'battle';
// Over, not merely "not live": a match still waiting for its opponent has not ended, and
// taking it for ended (as the creator watched it wait) kept its later result from ever
// being told.
const over = (phase) => phase === 'finished' || phase === 'cancelled';

// --- sound ---
let audio = null;

export function soundOn() {
  return localStorage.getItem(SOUND_KEY) === 'on';
}

export function setSound(on) {
  localStorage.setItem(SOUND_KEY, on ? 'on' : 'off');
  if (on) play('turn');
}

/** A short synthesised cue: `turn`, `hit`, `miss`, `sunk`, `won`, `lost`, `urgent`. Silent unless sound is on (off by default, remembered). */
export function play(cue) {
  if (!soundOn() || typeof AudioContext === 'undefined') return;
  try {
    audio = audio || new AudioContext();
    const notes = {
      turn: [[660, 0, 0.12], [880, 0.13, 0.16]],
      miss: [[220, 0, 0.18]],
      hit: [[392, 0, 0.08], [523, 0.08, 0.16]],
      sunk: [[523, 0, 0.1], [392, 0.1, 0.1], [262, 0.2, 0.3]],
      won: [[523, 0, 0.12], [659, 0.12, 0.12], [784, 0.24, 0.3]],
      lost: [[392, 0, 0.2], [330, 0.2, 0.2], [262, 0.4, 0.35]],
      // Time running out on the player's own clock: three short high beeps.
      urgent: [[988, 0, 0.07], [988, 0.14, 0.07], [988, 0.28, 0.07]],
    }[cue] || [];
    const now = audio.currentTime;
    for (const [frequency, start, length] of notes) {
      const oscillator = audio.createOscillator();
      const gain = audio.createGain();
      oscillator.type = cue === 'miss' ? 'sine' : 'triangle';
      oscillator.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, now + start);
      gain.gain.exponentialRampToValueAtTime(0.2, now + start + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, now + start + length);
      oscillator.connect(gain).connect(audio.destination);
      oscillator.start(now + start);
      oscillator.stop(now + start + length + 0.05);
    }
    // Says which cue was played, for whoever listens on the page (the browser test does).
    window.dispatchEvent(new CustomEvent('statki:cue', { detail: { cue } }));
  } catch {
    // No audio device: the cue is only a nicety.
  }
}

// --- browser notifications ---
export function notificationsOn() {
  return typeof Notification !== 'undefined' && Notification.permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === 'on';
}

/** Asks the browser's permission (only from a click) and remembers the choice. */
export async function enableNotifications() {
  if (typeof Notification === 'undefined') return false;
  const permission = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
  localStorage.setItem(NOTIFY_KEY, permission === 'granted' ? 'on' : 'off');
  return permission === 'granted';
}

export function disableNotifications() {
  localStorage.setItem(NOTIFY_KEY, 'off');
}

function notify(text, onClick) {
  if (!notificationsOn() || !document.hidden) return;
  try {
    const note = new Notification('Statki', { body: text, icon: ICON, tag: 'statki-turn' });
    note.onclick = () => { window.focus(); onClick(); note.close(); };
  } catch {
    // Some browsers allow notifications only from a service worker: the toast stays.
  }
}

// --- the watcher ---
/**
 * Follows `app.me`'s matches from every page. `app.onTurnsChanged(ids)` hears which matches
 * wait for the player's shot. Returns a stop function.
 */
export function watchTurns(app) {
  const seenKey = `statki.watch.${app.me.id}`;
  let seen = {};
  try { seen = JSON.parse(localStorage.getItem(seenKey) || '{}') || {}; } catch { seen = {}; }
  const told = new Set();
  // Matches whose end the player has seen (on the match page, or told here): never told again.
  const endedKey = `${seenKey}.ended`;
  let ended = [];
  try { ended = JSON.parse(localStorage.getItem(endedKey) || '[]') || []; } catch { ended = []; }
  const markEnded = (id) => {
    if (ended.includes(id)) return;
    ended = [...ended.slice(-49), id];
    localStorage.setItem(endedKey, JSON.stringify(ended));
  };
  let timer = null;
  let stopped = false;
  let waiting = new Set();

  function badge(on) {
    const link = document.querySelector('link[rel=icon]');
    const href = on ? BADGED_ICON : ICON;
    if (link && link.getAttribute('href') !== href) link.setAttribute('href', href);
  }

  let polling = false;
  async function poll() {
    if (stopped) return;
    // One look at a time: a slow answer must not overwrite what a later one saw.
    if (polling) return;
    polling = true;
    clearTimeout(timer);
    try {
      const answer = await app.api.playerMatches(app.me.id);
      const matches = Array.isArray(answer) ? answer : answer.matches || [];
      if (stopped) return;
      const next = new Set();
      const nowSeen = {};
      for (const match of matches) {
        const viewing = location.hash.startsWith(`#/m/${match.id}`) && !location.hash.includes('/replay');
        if (match.phase === 'battle' && match.turn === app.me.id) {
          next.add(match.id);
          // One notice per turn: the deadline changes with every shot.
          const turnKey = `${match.id}|${match.deadline}`;
          if (!told.has(turnKey) && !viewing) {
            told.add(turnKey);
            const opponent = match.players.find((player) => player !== app.me.id);
            nameOf(opponent).then((name) => {
              const text = t('alert.your_shot', { name });
              app.toast(text, { kind: 'turn', actions: [[t('notice.see'), () => app.navigate(`#/m/${match.id}`)]] });
              notify(text, () => app.navigate(`#/m/${match.id}`));
            });
            play('turn');
          } else if (viewing) {
            told.add(turnKey);
          }
        }
        if (live(match.phase)) nowSeen[match.id] = match.phase;
        // A match last seen live that has ended since: say how, once, unless it is on screen.
        if (seen[match.id] && over(match.phase) && !viewing && !ended.includes(match.id)) tellResult(match);
        if (over(match.phase) && (viewing || seen[match.id])) markEnded(match.id);
      }
      seen = nowSeen;
      localStorage.setItem(seenKey, JSON.stringify(seen));
      waiting = next;
      app.turnsWaiting = waiting;
      badge(waiting.size > 0);
      app.updateTitle();
      if (app.onTurnsChanged) app.onTurnsChanged(waiting);
    } catch {
      // A failed poll changes nothing; the next one tries again.
    }
    polling = false;
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }

  function tellResult(match) {
    const result = match.result || {};
    const reason = result.reason ? t(`reason.${result.reason}`) : '';
    let outcome;
    if (match.phase === 'cancelled') outcome = t('result.cancelled');
    else if (!result.winner) outcome = t('result.draw');
    else outcome = result.winner === app.me.id ? t('result.won') : t('result.lost');
    const opponent = match.players.find((player) => player !== app.me.id);
    nameOf(opponent).then((name) => {
      app.toast(t('alert.result', { outcome, name, reason }), {
        kind: 'result', timeout: RESULT_TOAST_MS, testId: 'away-result',
        actions: [[t('notice.see'), () => app.navigate(`#/m/${match.id}`)]],
      });
    });
  }

  poll();
  return {
    /** The match page showed `id` ended: its result is told already. */
    sawEnd(id) {
      markEnded(id);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      badge(false);
    },
    /** Looks again now (after a page's own command, so the title is right at once). */
    poke() {
      if (!polling) poll();
    },
  };
}

/** The header's controls for sound and notifications. */
export function alertControls(app) {
  const sound = h('button', {
    type: 'button', class: 'secondary small', 'data-testid': 'sound', 'aria-pressed': soundOn() ? 'true' : 'false',
    onclick: () => { setSound(!soundOn()); app.renderChrome(); },
  }, soundOn() ? t('alert.sound_on') : t('alert.sound_off'));
  const supported = typeof Notification !== 'undefined';
  const notifyButton = supported ? h('button', {
    type: 'button', class: 'secondary small', 'data-testid': 'notify', 'aria-pressed': notificationsOn() ? 'true' : 'false',
    onclick: async () => {
      if (notificationsOn()) disableNotifications();
      else if (!(await enableNotifications())) app.toast(t('alert.notify_denied'), { kind: 'error' });
      app.renderChrome();
    },
  }, notificationsOn() ? t('alert.notify_on') : t('alert.notify_off')) : null;
  return [sound, notifyButton];
}
