// The lobby: create a match (or challenge a player), the ranked queue, open matches to
// join, live matches to watch, bots to play where the server has them, and the
// player's own unfinished matches.

import { clockText, h, mount } from '../dom.js';
import { currentLanguage, known, t, rulesetTitle } from '../i18n.js';
import { playerLink, rememberNames } from '../names.js';
import { rememberBotGame } from '../botgames.js';

const REFRESH_MS = 5000;
const QUEUE_POLL_MS = 2000;

export function render(app, main, query) {
  const opponent = query.get('opponent');
  const timers = [];
  let alive = true;

  const openList = h('div', { class: 'list', 'data-testid': 'open-matches', 'aria-live': 'polite' });
  const liveList = h('div', { class: 'list', 'data-testid': 'live-matches' });
  const mineList = h('div', { class: 'list', 'data-testid': 'my-matches' });
  const queueBox = h('div', { class: 'queue', 'data-testid': 'queue' });
  const createBox = h('div');
  const botsSection = h('section', { class: 'panel', hidden: true, 'data-testid': 'bots' });
  // Shown once the server answers the live list (older servers only list open matches).
  const liveSection = h('section', { class: 'panel', hidden: true }, h('h2', {}, t('lobby.live')), liveList);
  // Shown once its first answers are in (2 s at most), so the sections do not jump as they fill.
  const lobbyEl = h('div', { class: 'lobby pending' },
    h('section', { class: 'panel' }, h('h2', {}, opponent ? t('lobby.challenge') : t('lobby.create')), createBox),
    h('section', { class: 'panel' }, h('h2', {}, t('lobby.queue')), queueBox),
    h('section', { class: 'panel' }, h('h2', {}, t('lobby.open')), openList),
    h('section', { class: 'panel' }, h('h2', {}, t('lobby.mine')), mineList),
    liveSection,
    botsSection);

  mount(main,
    h('h1', { class: 'visually-hidden' }, t('nav.lobby')),
    lobbyEl);

  const firstDraw = app.rulesets().then((rulesets) => {
    if (!alive) return null;
    mount(createBox, createForm(app, rulesets, opponent));
    return renderQueue(rulesets);
  }).catch((error) => mount(createBox, h('p', { class: 'form-error' }, error.message)));

  // --- lists ---
  function matchRow(match, action, detail) {
    rememberNames(match);
    return h('div', { class: 'row', 'data-match': match.id },
    h('div', { class: 'row-main' },
      h('div', { class: 'who' }, match.players.map((id, i) => [i ? ' – ' : '', playerLink(id), ratingBadge(match, id)])),
      h('div', { class: 'row-badges' },
        h('span', { class: 'badge ruleset' }, rulesetTitle(match.ruleset)),
        match.ranked ? h('span', { class: 'badge ranked' }, t('match.ranked')) : null,
        match.rules && match.rules.options && match.rules.options.extra_shot_on_hit ? h('span', { class: 'badge' }, t('option.extra_shot')) : null,
        match.phase === 'waiting' && match.invited && match.invited === app.me.id ? h('span', { class: 'badge invite' }, t('lobby.for_you')) : null,
        match.phase === 'battle' && match.turn === app.me.id ? h('span', { class: 'badge turn', 'data-testid': 'your-turn' }, t('lobby.your_turn')) : null,
        clockBadge(match),
        detail ? h('span', { class: 'muted small-text' }, detail) : null)),
    action);
  }

  /** The player's rating on the match's ladder, from the list entry (none before a rated game). */
  function ratingBadge(match, id) {
    const rating = match.ratings && match.ratings[id];
    if (typeof rating !== 'number') return null;
    const shown = String(Math.round(rating));
    return h('span', { class: 'row-rating', 'data-testid': 'row-rating', title: t('rating.short', { rating: shown }) }, ` (${shown})`);
  }

  /** The match's clocks ("⏱ 120 s · 30 s a shot"), so a joining player sees a custom clock. */
  function clockBadge(match) {
    const clock = (match.rules && match.rules.clock) || match.clock;
    if (!clock || !clock.shot_seconds) return null;
    return h('span', { class: 'badge clock-badge', 'data-testid': 'clock-badge' }, h('span', { class: 'icon-clock', 'aria-hidden': 'true' }), t('lobby.clock', { placement: clock.placement_seconds, shot: clock.shot_seconds }));
  }

  /** How a match stands for the signed-in player: its phase, or the result. */
  function standing(match) {
    // A live match says how long its running clock has left, so a match left behind (a guest's
    // bot match never placed) is seen running out rather than standing still.
    if ((match.phase === 'placement' || match.phase === 'battle') && typeof match.deadline_ms_left === 'number') {
      return t('lobby.time_left', { phase: t(`phase.${match.phase}`), time: clockText(match.deadline_ms_left) });
    }
    if (match.phase !== 'finished' || !match.result) return t(`phase.${match.phase}`);
    if (!match.result.winner) return t('profile.draw');
    return match.result.winner === app.me.id ? t('profile.win') : t('profile.loss');
  }

  async function refreshOpen() {
    try {
      const answer = await app.api.openMatches();
      const matches = Array.isArray(answer) ? answer : answer.matches || [];
      if (!alive) return;
      const rows = matches.map((match) => matchRow(match, match.players.includes(app.me.id)
        ? h('a', { class: 'button secondary', href: `#/m/${match.id}` }, t('lobby.yours'))
        : [h('button', { type: 'button', onclick: () => join(match.id) }, t('lobby.join')),
          match.invited === app.me.id ? h('button', { type: 'button', class: 'secondary', 'data-testid': 'decline', onclick: () => decline(match.id) }, t('lobby.decline')) : null]));
      mount(openList, rows.length ? rows : h('p', { class: 'empty' }, t('lobby.none_open')));
    } catch (error) {
      mount(openList, h('p', { class: 'form-error' }, error.message));
    }
  }

  async function refreshLive() {
    if (!app.features.live) return;
    try {
      const answer = await app.api.liveMatches();
      const matches = Array.isArray(answer) ? answer : answer.matches || [];
      if (!alive) return;
      liveSection.hidden = false;
      const rows = matches.map((match) => matchRow(match, h('a', { class: 'button secondary', href: `#/m/${match.id}` },
        match.players.includes(app.me.id) ? t('lobby.resume') : t('lobby.watch'))));
      mount(liveList, rows.length ? rows : h('p', { class: 'empty' }, t('lobby.none_live')));
    } catch {
      // This server does not list live matches: hide the section rather than show an error.
      app.features.live = false;
      liveSection.hidden = true;
    }
  }

  async function refreshMine() {
    try {
      // A bot game just left is being ended (match page): listed once that is done.
      if (app.leaving) await app.leaving;
      const answer = await app.api.playerMatches(app.me.id);
      const matches = (Array.isArray(answer) ? answer : answer.matches || []).slice(0, 8);
      if (!alive) return;
      const rows = matches.map((match) => matchRow(match, h('a', { class: 'button secondary', href: `#/m/${match.id}` },
        ['finished', 'cancelled'].includes(match.phase) ? t('lobby.view') : t('lobby.resume')), standing(match)));
      mount(mineList, rows.length ? rows : h('p', { class: 'empty' }, t('lobby.none_mine')));
    } catch (error) {
      mount(mineList, h('p', { class: 'form-error' }, error.message));
    }
  }

  async function decline(id) {
    try {
      await app.api.decline(id);
      app.toast(t('lobby.declined'));
    } catch (error) {
      app.error(error);
    }
    refreshOpen();
    refreshMine();
  }

  async function join(id) {
    try {
      await app.api.join(id);
      app.navigate(`#/m/${id}`);
    } catch (error) {
      app.error(error);
      refreshOpen();
    }
  }

  // --- bots ---
  async function showBots() {
    // Asked for directly: a server without bots refuses, and the section stays hidden.
    try {
      const [bots, rulesets] = await Promise.all([app.api.bots(), app.rulesets()]);
      if (!alive || !bots.length) return;
      const select = h('select', { 'aria-label': t('create.ruleset') },
        rulesets.map((ruleset) => h('option', { value: ruleset.id }, rulesetTitle(ruleset.id))));
      mount(botsSection, h('h2', {}, t('lobby.bots')),
        h('label', {}, t('create.ruleset'), select),
        h('div', { class: 'list' }, bots.map((bot) => h('div', { class: 'row' },
          h('div', { class: 'row-main' },
            h('div', {}, h('strong', {}, bot.name), h('span', { class: 'badge' }, t(`bot.${bot.level}`))),
            h('div', { class: 'muted small-text', 'data-testid': 'bot-description' }, known(`bot.description.${bot.level}`) && currentLanguage() !== 'en' ? t(`bot.description.${bot.level}`) : bot.description)),
          h('button', { type: 'button', onclick: async () => {
            try {
              const match = await app.api.createMatch({ ruleset: select.value, ranked: false, opponent: bot.id });
              rememberBotGame(match.id);
              app.navigate(`#/m/${match.id}`);
            } catch (error) { app.error(error); }
          } }, t('lobby.play'))))));
      botsSection.hidden = false;
    } catch {
      botsSection.hidden = true;
    }
  }

  // --- ranked queue ---
  let queueTimer = null;
  function renderQueue(rulesets) {
    const select = h('select', { id: 'queue-ruleset', name: 'ruleset' },
      rulesets.map((ruleset) => h('option', { value: ruleset.id }, rulesetTitle(ruleset.id))));
    async function poll() {
      clearTimeout(queueTimer);
      if (!alive) return;
      try {
        const state = await app.api.queue();
        if (!alive) return;
        if (state.status === 'queued') {
          mount(queueBox, h('div', { class: 'searching', role: 'status', 'data-testid': 'searching' },
            h('span', { class: 'spinner', 'aria-hidden': 'true' }),
            h('span', {}, t('queue.searching', { ruleset: rulesetTitle(state.ruleset) })),
            h('span', { class: 'queue-who', 'data-testid': 'queue-rating' }, app.me.name, typeof state.rating === 'number' ? ` (${Math.round(state.rating)})` : ''),
            h('span', { class: 'muted' }, t('queue.window', { window: Math.round(state.window), waiting: state.waiting }))),
          h('button', { type: 'button', class: 'secondary', onclick: leave }, t('queue.leave')));
          queueTimer = setTimeout(poll, QUEUE_POLL_MS);
        } else if (state.status === 'paired' && state.match_id && await stillOn(state.match_id)) {
          if (!alive) return;
          mount(queueBox, h('p', {}, t('queue.paired')), h('a', { class: 'button', href: `#/m/${state.match_id}` }, t('lobby.resume')),
            idleForm());
        } else {
          mount(queueBox, idleForm());
        }
      } catch (error) {
        mount(queueBox, h('p', { class: 'form-error' }, error.message), idleForm());
      }
    }
    /** Whether the match the queue paired is still being played (a pairing is old news once it ended). */
    async function stillOn(matchId) {
      try {
        const match = await app.api.match(matchId);
        return match.phase !== 'finished' && match.phase !== 'cancelled';
      } catch {
        return false;
      }
    }
    function idleForm() {
      return h('form', { class: 'inline', onsubmit: async (event) => {
        event.preventDefault();
        try {
          const state = await app.api.joinQueue(select.value);
          if (state.status === 'paired' && state.match_id) app.navigate(`#/m/${state.match_id}`);
          else poll();
        } catch (error) { app.error(error); }
      } }, h('label', { for: 'queue-ruleset' }, t('create.ruleset')), select, h('button', { type: 'submit' }, t('queue.join')));
    }
    async function leave() {
      try { await app.api.leaveQueue(); } catch (error) { app.error(error); }
      poll();
    }
    return poll();
  }

  const firstAnswers = Promise.allSettled([firstDraw, refreshOpen(), refreshLive(), refreshMine(), showBots()]);
  Promise.race([firstAnswers, new Promise((resolve) => { setTimeout(resolve, 2000); })]).then(() => lobbyEl.classList.remove('pending'));
  timers.push(setInterval(() => { refreshOpen(); refreshLive(); refreshMine(); }, REFRESH_MS));
  const unsubscribe = app.onNotice(() => { refreshOpen(); refreshMine(); });
  return () => {
    alive = false;
    timers.forEach(clearInterval);
    clearTimeout(queueTimer);
    unsubscribe();
  };
}

/** The new-match form: preset, ranked, the preset's house option and a custom clock when unranked. */
function createForm(app, rulesets, opponent) {
  const byId = new Map(rulesets.map((ruleset) => [ruleset.id, ruleset]));
  const defaults = rulesets.find((ruleset) => ruleset.default) || rulesets[0];
  const ruleset = h('select', { id: 'create-ruleset', name: 'ruleset' },
    rulesets.map((r) => h('option', { value: r.id, selected: r === defaults }, rulesetTitle(r.id))));
  const ranked = h('input', { id: 'create-ranked', type: 'checkbox', name: 'ranked' });
  const extraShot = h('input', { id: 'create-extra', type: 'checkbox', name: 'extra_shot_on_hit' });
  const extraRow = h('label', { class: 'check', for: 'create-extra' }, extraShot, t('option.extra_shot_long'));
  const customClock = h('input', { id: 'create-clock', type: 'checkbox', name: 'custom_clock' });
  const placement = h('input', { id: 'create-placement', type: 'number', min: 5, max: 600, step: 1, name: 'placement_seconds' });
  const shot = h('input', { id: 'create-shot', type: 'number', min: 2, max: 120, step: 1, name: 'shot_seconds' });
  const clockRow = h('label', { class: 'check', for: 'create-clock' }, customClock, t('create.custom_clock'));
  const clockFields = h('div', { class: 'clock-fields' },
    h('label', { for: 'create-placement' }, t('create.placement_seconds'), placement),
    h('label', { for: 'create-shot' }, t('create.shot_seconds'), shot));
  const summary = h('p', { class: 'muted summary' });

  function sync() {
    const rules = byId.get(ruleset.value);
    const unranked = !ranked.checked;
    extraRow.hidden = !(rules.extra_shot_option && unranked);
    clockRow.hidden = !unranked;
    clockFields.hidden = !(unranked && customClock.checked);
    if (!placement.value || placement.dataset.ruleset !== rules.id) {
      placement.value = rules.clock.placement_seconds;
      shot.value = rules.clock.shot_seconds;
      placement.dataset.ruleset = rules.id;
    }
    mount(summary, t('create.summary', {
      fleet: rules.fleet.map((ship) => ship.length).join(', '),
      touch: rules.ships_may_touch ? t('rules.touch_yes') : t('rules.touch_no'),
      extra: rules.extra_shot_on_hit ? t('rules.extra_yes') : t('rules.extra_no'),
    }));
  }
  [ruleset, ranked, customClock].forEach((el) => el.addEventListener('change', sync));

  const form = h('form', { class: 'create', 'data-testid': 'create-match', onsubmit: async (event) => {
    event.preventDefault();
    const rules = byId.get(ruleset.value);
    const body = { ruleset: rules.id, ranked: ranked.checked };
    if (!ranked.checked && rules.extra_shot_option && extraShot.checked) body.options = { extra_shot_on_hit: true };
    if (!ranked.checked && customClock.checked) {
      body.clock = { placement_seconds: Number(placement.value), shot_seconds: Number(shot.value) };
    }
    if (opponent) body.opponent = opponent;
    const submit = form.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      const match = await app.api.createMatch(body);
      app.navigate(`#/m/${match.id}`);
    } catch (error) {
      app.error(error);
      submit.disabled = false;
    }
  } },
  opponent ? h('p', {}, t('create.challenging'), ' ', playerLink(opponent), ' ', h('a', { href: '#/' }, t('create.cancel_challenge'))) : null,
  h('label', { for: 'create-ruleset' }, t('create.ruleset'), ruleset),
  summary,
  h('label', { class: 'check', for: 'create-ranked' }, ranked, t('create.ranked')),
  extraRow, clockRow, clockFields,
  h('button', { type: 'submit' }, opponent ? t('create.challenge_button') : t('create.button')));
  sync();
  return form;
}
