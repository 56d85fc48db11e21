// One match as its viewer sees it: waiting for an opponent, placing the fleet, the
// battle, and the end with both fleets opened and their commitments checked in the
// browser. Everything drawn comes from the viewer's own view (GET /v1/matches/{id}),
// refreshed whenever the match stream reports an event; shot answers are shown at once.

import { clockText, h, mount } from '../dom.js';
import { t, rulesetTitle, shipName } from '../i18n.js';
import { Board } from '../board.js';
import { fits, parseCell, randomFleet, shipCells, shipShape } from '../cells.js';
import { follow } from '../sse.js';
import { forgetProfile, nameOf, playerLink, ratingOf, rememberNames } from '../names.js';
import { verifyFleet } from '../commit.js';
import { play } from '../alerts.js';
import { forgetBotGame, isBotGame } from '../botgames.js';

const TICK_MS = 250;
// A running clock turns urgent in its last 5 s, whatever its length (a clock of 5 s or less
// in its last half, so a fresh one never starts urgent); the player whose clock it is hears
// a cue then, when sound is on.
const URGENT_MS = 5_000;
const PHONE = '(max-width: 560px)';

export function render(app, main, id) {
  let view = null;
  let preset = null;
  let alive = true;
  let stream = null;
  let orientation = 'horizontal';
  let hover = null;
  let clockEnd = null;
  let fetching = false;
  let again = false;
  let verified = null;
  let rematch = null;
  let confirmResign = false;
  let busy = false;
  let ratingChange = null;
  let cancelReason = null;
  // A layout proposed in the browser for the ships not yet placed (index → {cell, orientation}),
  // drawn but not sent until "Ready"; null while placing by hand.
  let draft = null;
  // 'random' for a layout drawn in the browser, 'review' for the last ship placed by hand
  // and held here until Ready (placing it through the API would lock the fleet at once).
  let draftKind = 'random';
  let draftOffered = false;
  let urgentCued = null;
  let wasMyTurn = false;
  let summary = null;
  let drag = null;

  // Persistent parts, so focus stays on the board across updates.
  const title = h('div', { class: 'match-title' });
  const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite', 'data-testid': 'status' });
  // One chip per player (name, rating, clock), the viewer's first; sticky, so a phone
  // scrolled to the opponent's sea still sees whose shot it is and how long is left.
  const playersBar = h('div', { class: 'players-bar', 'data-testid': 'players' });
  const chips = new Map();
  const firstShot = h('p', { class: 'first-shot', 'data-testid': 'first-shot', hidden: true });
  // On a phone the opponent's sea comes first: a small copy of the player's own sea rides in
  // the sticky bar while they aim (the full sea below stays the one screen readers use).
  const miniSea = h('div', { class: 'mini-sea', role: 'img', 'aria-label': t('board.own_mini'), 'data-testid': 'mini-sea', hidden: true });
  const live = h('span', { class: 'live-dot', 'data-testid': 'live' });
  const said = h('p', { class: 'announce', 'aria-live': 'assertive', 'data-testid': 'announce' });
  const ownBoard = new Board({ label: t('board.own'), owner: 'me', testId: 'own-board', onActivate: ownCell, onRefused: refusedCell, onHover: (cell) => { hover = cell; drawBoards(); } });
  const targetBoard = new Board({ label: t('board.target'), owner: 'them', testId: 'target-board', onActivate: fire });
  // Why a cell or a drop was refused while placing, in words (and the cell shakes).
  const placeNote = h('p', { class: 'place-note', role: 'status', 'aria-live': 'polite', 'data-testid': 'place-note' });
  const ownCaption = h('h2', { class: 'sea-caption', 'data-under-fire': t('board.under_fire') });
  const targetCaption = h('h2', { class: 'sea-caption', 'data-under-fire': t('board.under_fire') });
  const ownSide = h('div', { class: 'sea-side' });
  const targetSide = h('div', { class: 'sea-side' });
  const ownSea = h('section', { class: 'sea' }, ownCaption, ownBoard.el, ownSide);
  const targetSea = h('section', { class: 'sea target' }, targetCaption, targetBoard.el, targetSide);
  const controls = h('section', { class: 'controls panel', 'data-testid': 'controls' });
  const ending = h('section', { class: 'ending', 'data-testid': 'ending' });
  // The fixed reactions: buttons for the two players while the match is played, and what
  // anyone in the match sent since this page opened, for players and spectators alike.
  const reactionButtons = h('div', { class: 'reaction-buttons', role: 'group', 'aria-label': t('reactions.title') });
  const reactionLog = h('ul', { class: 'reaction-log', 'data-testid': 'reaction-log', 'aria-live': 'polite' });
  const reactionsTitle = h('h2', {}, t('reactions.title'));
  const reactionsEl = h('section', { class: 'reactions panel', 'data-testid': 'reactions', hidden: true }, reactionsTitle, reactionButtons, reactionLog);
  const REACTIONS = ['good_luck', 'nice_shot', 'oops', 'thanks', 'well_played', 'good_game'];
  const REACTION_GAP_MS = 3000;
  let reactingUntil = 0;
  let reactionTimer = null;

  // Laid out but not shown until the first view is drawn (2 s at most), so nothing jumps as it fills.
  const matchEl = h('div', { class: 'match pending', 'data-testid': 'match' },
      h('header', { class: 'match-head' }, title, live),
      h('div', { class: 'turn-bar', 'data-testid': 'turn-bar' }, playersBar, miniSea, status),
      // One line for the news: who fires first until the first shot, then what each shot found.
      h('div', { class: 'news' }, firstShot, said),
      ending,
      h('div', { class: 'seas' }, ownSea, targetSea, controls),
      reactionsEl);
  mount(main, matchEl);
  const reveal = () => matchEl.classList.remove('pending');
  const revealTimer = setTimeout(reveal, 2000);

  // --- reading ---
  async function load() {
    try {
      const rulesets = await app.rulesets();
      const first = await app.api.match(id);
      if (!alive) return;
      preset = rulesets.find((ruleset) => ruleset.id === first.ruleset);
      accept(first);
      stream = follow(`/v1/matches/${id}/stream`, {
        token: () => app.api.token,
        lastEventId: first.seq,
        onEvent: ({ event, data }) => {
          // A stream that opens with the caller's whole view (`state`) saves a read; any
          // other kind, known or not, only says that something happened.
          if (event === 'state' && data && data.id === id && typeof data.seq === 'number') { accept(data); return; }
          // Someone came or went: not an event of the match, nothing to read again.
          if (event === 'presence' && data && data.player) { setPresence(data.player, data.presence); return; }
          describeEvent(data);
          refresh();
        },
        onState: (state) => {
          live.className = `live-dot ${state}`;
          live.textContent = t(`stream.${state}`);
          if (state === 'open') refresh();
        },
      });
    } catch (error) {
      if (!alive) return;
      mount(main, h('div', { class: 'panel' }, h('p', { class: 'form-error', role: 'alert' }, error.message), h('a', { href: '#/' }, t('nav.back'))));
    }
  }

  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const next = await app.api.match(id);
      if (alive) accept(next);
    } catch (error) {
      if (alive) app.error(error);
    }
    fetching = false;
    if (again && alive) { again = false; refresh(); }
  }

  function accept(next) {
    if (view && next.seq < view.seq) return;
    // The same state read again (the stream's opening `state`, then a read once it is open):
    // only the clock is taken from it; nothing else changed, nothing is drawn again.
    if (view && next.seq === view.seq && next.phase === view.phase) {
      clockEnd = typeof next.deadline_ms_left === 'number' && next.deadline ? performance.now() + next.deadline_ms_left : null;
      if (next.presence) { view.presence = next.presence; drawPresence(); }
      return;
    }
    rememberNames(next);
    const wasOver = view && isOver(view);
    view = next;
    clockEnd = typeof next.deadline_ms_left === 'number' && next.deadline ? performance.now() + next.deadline_ms_left : null;
    if (isOver(view) && !wasOver) {
      verifyRecord();
      loadSummary();
      loadRematch();
      loadRatingChange();
      loadCancelReason();
      if (app.turns) app.turns.sawEnd(id);
      // A cue for an end seen as it happens, not for an old match opened again.
      if (wasOver === false && participant() && view.result && view.result.winner) play(view.result.winner === me() ? 'won' : 'lost');
    }
    draw();
    const myTurn = view.phase === 'battle' && participant() && view.turn === me();
    if (myTurn && !wasMyTurn) bringTargetIntoView();
    wasMyTurn = myTurn;
  }

  /**
   * On a phone, the turn coming to the player brings the whole target sea on screen, just
   * under the sticky bar (clocks and whose shot), unless it is already all in sight.
   */
  function bringTargetIntoView() {
    if (!window.matchMedia || !window.matchMedia(PHONE).matches) return;
    requestAnimationFrame(() => {
      if (!alive || targetSea.hidden) return;
      const bar = main.querySelector('.turn-bar');
      const barBottom = bar ? bar.getBoundingClientRect().bottom : 0;
      const board = targetBoard.el.getBoundingClientRect();
      if (board.top >= barBottom && board.bottom <= window.innerHeight) return;
      // Once scrolled, the bar sticks at the top: the caption goes just under it.
      const stuck = bar ? bar.offsetHeight : 0;
      const caption = targetCaption.getBoundingClientRect();
      window.scrollBy({ top: caption.top - stuck - 2, behavior: 'instant' });
    });
  }

  // --- helpers over the view ---
  const isOver = (v) => v.phase === 'finished' || v.phase === 'cancelled';
  const me = () => view.you;
  const participant = () => Boolean(view.you);
  const opponentOf = (player) => view.players.find((p) => p !== player) || null;
  const seatOf = (player) => view.players.indexOf(player);
  const extraShotRule = () => Boolean(preset.extra_shot_on_hit || (view.rules.options && view.rules.options.extra_shot_on_hit));

  /** Whether `player` is on an extra shot: the rule gives one and their last shot found a ship. */
  function onExtraShot(player) {
    if (!extraShotRule() || view.turn !== player) return false;
    const side = view.sides[seatOf(player)];
    const last = side && side.shots[side.shots.length - 1];
    return Boolean(last && last.outcome !== 'miss');
  }

  /** The opened fleet of `player` as cells → how the cell is drawn, once the match is over. */
  function openedFleet(player) {
    const cells = new Map();
    if (!view.record) return cells;
    const opened = view.record.find((entry) => entry.player === player);
    if (!opened) return cells;
    opened.ships.forEach((ship, index) => {
      if (!ship) return;
      for (const [cell, shape] of shipShape(shipCells(ship.cell, ship.orientation, preset.fleet[index].length))) cells.set(cell, shape);
    });
    return cells;
  }

  /** Every cell of `ships` (each with `cells`) → its hull shape. */
  function shapesOf(ships) {
    const shapes = new Map();
    for (const ship of ships) for (const [cell, shape] of shipShape(ship.cells)) shapes.set(cell, shape);
    return shapes;
  }

  // --- drawing ---
  function draw() {
    if (!view || !preset) return;
    offerDraft();
    drawTitle();
    drawPlayers();
    drawPresence();
    drawStatus();
    drawBoards();
    drawControls();
    drawEnding();
    drawReactions();
    tick();
    reveal();
  }

  function drawReactions() {
    const playing = view.phase === 'placement' || view.phase === 'battle';
    const canReact = participant() && playing;
    reactionsTitle.textContent = t('reactions.title');
    reactionButtons.setAttribute('aria-label', t('reactions.title'));
    const waiting = performance.now() < reactingUntil;
    mount(reactionButtons, canReact ? REACTIONS.map((reaction) => h('button', {
      type: 'button', class: 'reaction', 'data-reaction': reaction, disabled: waiting, onclick: () => react(reaction),
    }, t(`reaction.${reaction}`))) : null);
    reactionsEl.hidden = !canReact && reactionLog.children.length === 0;
  }

  async function react(reaction) {
    if (performance.now() < reactingUntil) return;
    // One reaction every 3 s (the server's limit): the buttons rest meanwhile.
    reactingUntil = performance.now() + REACTION_GAP_MS;
    drawReactions();
    clearTimeout(reactionTimer);
    reactionTimer = setTimeout(() => { if (alive && view) drawReactions(); }, REACTION_GAP_MS + 50);
    try {
      await app.api.react(id, reaction);
    } catch (error) {
      app.error(error);
    }
  }

  function showReaction(event) {
    nameOf(event.player).then((name) => {
      if (!alive) return;
      const text = t('reactions.said', { name, reaction: t(`reaction.${event.reaction}`) });
      reactionLog.prepend(h('li', { class: 'reaction-said', 'data-player': event.player }, text));
      while (reactionLog.children.length > 10) reactionLog.lastElementChild.remove();
      reactionsEl.hidden = false;
    });
  }

  function drawTitle() {
    const [first, second] = view.players;
    mount(title,
      h('h1', {}, first ? playerLink(first) : '…', h('span', { class: 'versus' }, ' vs '), second ? playerLink(second)
        : view.invited ? playerLink(view.invited)
          : h('span', { class: 'muted' }, isOver(view) ? t('match.no_opponent') : t('match.empty_seat'))),
      h('div', { class: 'badges' },
        h('span', { class: 'badge ruleset' }, rulesetTitle(view.ruleset)),
        view.ranked ? h('span', { class: 'badge ranked' }, t('match.ranked')) : h('span', { class: 'badge' }, t('match.unranked')),
        extraShotRule() ? h('span', { class: 'badge extra', 'data-testid': 'extra-rule' }, t('option.extra_shot')) : null,
        // The clocks, so a player about to join sees a custom clock before taking the seat.
        view.rules && view.rules.clock ? h('span', { class: 'badge clock-badge', 'data-testid': 'clock-badge' }, h('span', { class: 'icon-clock', 'aria-hidden': 'true' }), t('lobby.clock', { placement: view.rules.clock.placement_seconds, shot: view.rules.clock.shot_seconds })) : null,
        !participant() ? h('span', { class: 'badge spectator' }, t('match.spectating')) : null));
  }

  function drawStatus() {
    const whose = (player, key) => {
      const span = h('span', {}, '…');
      nameOf(player).then((name) => { span.textContent = t(key, { name }); });
      return span;
    };
    let text;
    let mood = '';
    switch (view.phase) {
      case 'waiting':
        text = participant() ? t('status.waiting') : t('status.waiting_spectator');
        break;
      case 'placement':
        if (!participant()) text = t('status.placement_spectator');
        else if (view.fleet_locked) text = view.opponent_fleet_locked ? t('status.both_ready') : t('status.fleet_ready_waiting');
        else if (draft && draftKind === 'review') text = t('status.review');
        else if (draft) text = t('status.draft');
        else text = t('status.placing', { ship: view.next_ship ? shipName(view.next_ship.name) : '' });
        break;
      case 'battle':
        if (participant() && view.turn === me()) {
          text = onExtraShot(me()) ? t('status.your_extra_shot') : t('status.your_turn');
          mood = onExtraShot(me()) ? 'mine extra' : 'mine';
        } else if (participant()) {
          text = whose(view.turn, onExtraShot(view.turn) ? 'status.their_extra_shot' : 'status.their_turn');
          mood = 'theirs';
        } else {
          text = whose(view.turn, onExtraShot(view.turn) ? 'status.spectator_extra' : 'status.spectator_turn');
        }
        break;
      default:
        text = resultText();
        mood = 'over';
    }
    // At the end the banner says it; the status stays for screen readers.
    status.className = `status ${mood}${isOver(view) ? ' visually-hidden' : ''}`;
    // The tab's title tells a player in another tab that it is their turn.
    app.pageTurn = mood.startsWith('mine');
    app.updateTitle();
    mount(status, text);
    // Until the first shot, say who was drawn to fire first.
    const noShotYet = view.phase === 'battle' && view.sides.every((side) => side.shots.length === 0);
    firstShot.hidden = !noShotYet;
    if (noShotYet) mount(firstShot, participant() && view.turn === me() ? t('battle.first_you') : whose(view.turn, 'battle.first_them'));
  }

  /** The chips' order: the viewer first; a spectator sees the title's order. */
  function seatOrder() {
    if (participant()) return [me(), opponentOf(me())].filter(Boolean);
    return view.players.filter(Boolean);
  }

  function drawPlayers() {
    const order = seatOrder();
    const key = `${order.join(',')}|${currentKey()}`;
    if (playersBar.dataset.key === key) return;
    playersBar.dataset.key = key;
    chips.clear();
    mount(playersBar, order.map((player) => {
      const clockEl = h('span', { class: 'clock', role: 'timer', 'aria-live': 'off' });
      const rating = h('span', { class: 'rating', 'data-testid': 'rating' });
      ratingOf(player, view.ruleset).then((value) => { if (value !== null && alive) rating.textContent = String(Math.round(value)); });
      const mine = participant() && player === me();
      // Whether the other player is here (an open stream of theirs, as the server says).
      const presence = mine ? null : h('span', { class: 'presence', 'data-testid': 'presence' },
        h('span', { class: 'presence-dot', 'aria-hidden': 'true' }), h('span', { class: 'visually-hidden presence-text' }));
      const awayNote = mine ? null : h('span', { class: 'away-note', 'data-testid': 'away-note', 'aria-hidden': 'true', hidden: true }, t('presence.away'));
      const el = h('div', { class: `player-chip${mine ? ' me' : ''}`, 'data-player': player },
        h('span', { class: 'chip-name' }, presence, playerLink(player, { link: false }), mine ? h('span', { class: 'muted' }, ` (${t('match.you')})`) : null),
        awayNote, rating, clockEl);
      chips.set(player, { el, clock: clockEl, presence, awayNote });
      return el;
    }));
  }

  /** Marks each chip online or away from the view's `presence` (kept current by the stream). */
  function drawPresence() {
    for (const [player, chip] of chips) {
      if (!chip.presence) continue;
      const state = view.presence && view.presence[player];
      chip.presence.hidden = !state;
      if (!state) continue;
      chip.presence.dataset.presence = state;
      chip.presence.title = t(`presence.${state}`);
      chip.presence.querySelector('.presence-text').textContent = `${t(`presence.${state}`)}: `;
      if (chip.awayNote) chip.awayNote.hidden = state !== 'away' || isOver(view);
    }
  }

  function setPresence(player, state) {
    if (!view || !view.players.includes(player) || (state !== 'online' && state !== 'away')) return;
    const before = view.presence && view.presence[player];
    view.presence = { ...(view.presence || {}), [player]: state };
    drawPresence();
    // The opponent leaving (or coming back) mid-match is said, not only drawn.
    const playing = view.phase === 'placement' || view.phase === 'battle';
    if (participant() && player !== me() && playing && before && before !== state) {
      nameOf(player).then((name) => {
        if (!alive) return;
        announce(t(state === 'away' ? 'presence.left' : 'presence.back', { name }));
      });
    }
  }

  /** Redraws the chips when the language changes (their words are translated). */
  function currentKey() {
    return t('match.you');
  }

  /**
   * The clock of `player` now: a placement clock runs for whoever has not locked a fleet;
   * a shot clock runs only for the player on turn (the other's shows its full allowance).
   */
  function clockFor(player) {
    const clock = view.rules && view.rules.clock;
    if (!clock || clockEnd === null) return null;
    if (view.phase === 'placement') {
      const side = view.sides && view.sides[seatOf(player)];
      const locked = participant() && player === me() ? view.fleet_locked : Boolean(side && side.fleet_locked);
      return { running: !locked, done: locked, total: clock.placement_seconds * 1000 };
    }
    if (view.phase === 'battle') return { running: view.turn === player, done: false, total: clock.shot_seconds * 1000 };
    return null;
  }

  function resultText() {
    if (view.phase === 'cancelled') return cancelReason ? t(`cancel.${cancelReason}`) : t('result.cancelled');
    const result = view.result || {};
    const reason = t(`reason.${result.reason}`);
    if (!result.winner) return `${t('result.draw')} — ${reason}`;
    if (participant()) return `${result.winner === me() ? t('result.won') : t('result.lost')} — ${reason}`;
    const span = h('span', {}, '…');
    nameOf(result.winner).then((name) => { span.textContent = `${t('result.player_won', { name })} — ${reason}`; });
    return span;
  }

  function tick() {
    if (!alive || !view) return;
    for (const [player, chip] of chips) {
      const state = clockFor(player);
      chip.el.classList.toggle('on-turn', Boolean(state && state.running && view.phase === 'battle'));
      if (!state) { chip.clock.hidden = true; continue; }
      chip.clock.hidden = false;
      const kind = view.phase === 'placement' ? t('clock.placement') : t('clock.shot');
      if (state.done) {
        chip.clock.className = 'clock done';
        chip.clock.textContent = t('clock.ready');
        chip.clock.setAttribute('aria-label', `${kind}: ${t('clock.ready')}`);
        continue;
      }
      const left = state.running ? Math.max(0, clockEnd - performance.now()) : state.total;
      // Urgent only for the player whose clock runs, and only near its end.
      const urgent = state.running && left <= Math.min(URGENT_MS, state.total / 2);
      // Time running out on the player's own clock: one cue per clock (the deadline moves with every shot).
      if (urgent && participant() && player === me() && urgentCued !== `${view.phase}|${view.deadline}`) {
        urgentCued = `${view.phase}|${view.deadline}`;
        play('urgent');
      }
      const className = `clock ${state.running ? 'running' : 'paused'}${urgent ? ' urgent' : ''}`;
      if (chip.clock.className !== className) chip.clock.className = className;
      const text = clockText(left);
      if (chip.clock.textContent !== text) {
        chip.clock.textContent = text;
        chip.clock.setAttribute('aria-label', `${kind}: ${text}${state.running ? '' : ` (${t('clock.paused')})`}`);
      }
    }
  }

  function drawBoards() {
    if (!view) return;
    // The sea being fired at now is highlighted: the one of the player not on turn.
    const battle = view.phase === 'battle';
    const leftOwner = participant() ? me() : view.players[0];
    ownSea.classList.toggle('under-fire', battle && view.turn !== leftOwner);
    targetSea.classList.toggle('under-fire', battle && view.turn === leftOwner);
    const placing = participant() && view.phase === 'placement';
    // A match cancelled before its battle (declined, withdrawn, not joined) has no seas to show.
    const fought = view.sides && view.sides.some((side) => side.shots.length > 0);
    const started = view.phase === 'battle' || view.phase === 'finished' || (view.phase === 'cancelled' && fought);
    miniSea.hidden = !(participant() && battle);
    ownSea.hidden = view.phase === 'waiting' || !started && !placing;
    targetSea.hidden = !started;
    if (placing || view.phase === 'waiting') {
      mount(ownSide);
      if (placing) drawPlacementBoard();
      ownCaption.textContent = t('board.own');
    } else if (participant()) {
      drawOwnSea();
      drawTargetSea();
      ownCaption.textContent = t('board.own');
      targetCaption.replaceChildren(t('board.target_of'), ' ', playerLink(opponentOf(me()), { link: false }));
    } else {
      drawSpectatorSeas();
    }
  }

  /** A random layout is shown first (Ready takes it, Re-roll draws another); none once the fleet is locked. */
  function offerDraft() {
    if (view.phase !== 'placement' || !participant()) return;
    if (!view.fleet_locked && !draftOffered && view.fleet.every((ship) => !ship.placement)) {
      draftOffered = true;
      rollDraft();
    }
    if (view.fleet_locked) draft = null;
  }

  function drawPlacementBoard() {
    offerDraft();
    ownBoard.el.classList.toggle('placing', !view.fleet_locked);
    const owner = new Map();
    view.fleet.forEach((ship) => ship.cells.forEach((cell) => owner.set(cell, ship)));
    const drafted = draftShips();
    if (drafted.length) {
      const shapes = shapesOf([...view.fleet, ...drafted]);
      const dragCells = drag && drag.target ? new Set(drag.target) : new Set();
      drafted.forEach((ship) => ship.cells.forEach((cell) => owner.set(cell, ship)));
      ownBoard.setShips([...view.fleet.filter((ship) => ship.placement), ...drafted]
        .filter((ship) => !(drag && drag.ship.index === ship.index)).map((ship) => ({ cells: ship.cells, name: ship.name, tone: 'me' })));
      ownBoard.interactive = true;
      ownBoard.update((cell) => {
        const ship = owner.get(cell);
        if (dragCells.has(cell)) return { kind: 'preview', extra: shipShape(drag.target).get(cell), label: t('cell.preview', { ship: shipName(drag.ship.name) }) };
        if (ship) return { kind: 'ship', extra: `${shapes.get(cell)}${ship.draft ? ' draft' : ''}${drag && drag.ship.index === ship.index ? ' dragging' : ''}`, offered: true, label: t('cell.drag', { ship: shipName(ship.name) }) };
        return { kind: 'water', label: t('cell.water') };
      });
      return;
    }
    const next = view.next_ship;
    const hints = new Set(next && view.placement_hints ? view.placement_hints[orientation] : []);
    const previewCells = next && hover && hints.has(hover) ? shipCells(hover, orientation, next.length) : [];
    const preview = shipShape(previewCells);
    const shapes = shapesOf(view.fleet);
    const locked = view.fleet_locked;
    ownBoard.setShips(view.fleet.filter((ship) => ship.placement && !(drag && drag.ship.index === ship.index)).map((ship) => ({ cells: ship.cells, name: ship.name, tone: 'me' })));
    ownBoard.interactive = !locked;
    ownBoard.update((cell) => {
      const ship = owner.get(cell);
      if (ship) {
        return { kind: 'ship', extra: `${shapes.get(cell)}${preview.has(cell) ? ' clash' : ''}`, offered: !locked, label: locked ? shipName(ship.name) : t('cell.pick_up', { ship: shipName(ship.name) }) };
      }
      if (drag && drag.target && drag.target.includes(cell)) return { kind: 'preview', extra: shipShape(drag.target).get(cell), label: t('cell.preview', { ship: shipName(drag.ship.name) }) };
      if (preview.has(cell)) return { kind: 'preview', extra: preview.get(cell), offered: hints.has(cell), label: t('cell.preview', { ship: shipName(next.name) }) };
      if (hints.has(cell)) return { kind: 'hint', offered: !locked, label: t('cell.bow', { ship: shipName(next.name), orientation: t(`orientation.${orientation}`) }) };
      return { kind: 'water', label: t('cell.water') };
    });
  }

  function drawOwnSea() {
    const owner = new Map();
    view.fleet.forEach((ship) => ship.cells.forEach((cell) => owner.set(cell, ship)));
    const incoming = new Map(view.incoming.map((shot) => [shot.cell, shot.outcome]));
    const lastIncoming = view.incoming.length ? view.incoming[view.incoming.length - 1].cell : null;
    const shapes = shapesOf(view.fleet);
    ownBoard.interactive = false;
    ownBoard.setShips(view.fleet.filter((ship) => ship.cells.length).map((ship) => ({ cells: ship.cells, name: ship.name, tone: ship.sunk ? 'sunk-me' : 'me', sunk: ship.sunk })));
    ownBoard.update(withLast(lastIncoming, (cell) => {
      const ship = owner.get(cell);
      const shot = incoming.get(cell);
      if (ship && ship.sunk) return { kind: 'ship sunk-own', extra: shapes.get(cell), label: t('cell.own_sunk', { ship: shipName(ship.name) }) };
      if (ship && shot) return { kind: 'ship hit', extra: shapes.get(cell), label: t('cell.own_hit', { ship: shipName(ship.name) }) };
      if (ship) return { kind: 'ship', extra: shapes.get(cell), label: shipName(ship.name) };
      if (shot) return { kind: 'miss', label: t('cell.miss') };
      return { kind: 'water', label: t('cell.water') };
    }));
    drawMiniSea(owner, incoming);
    mount(ownSide, shotLog(view.incoming, t('log.theirs_at_you'), 'shot-log-incoming'), h('ul', { class: 'fleet-status' }, view.fleet.map((ship) => h('li', { class: ship.sunk ? 'sunk' : '' },
      h('span', { class: 'ship-bar', 'aria-hidden': 'true' }, Array.from({ length: ship.length }, (_, i) => h('i', { class: i < ship.hits.length ? 'hit' : '' }))),
      ' ', shipName(ship.name), ship.sunk ? ` — ${t('fleet.sunk')}` : ''))));
  }

  /** The small copy of the player's own sea: ships, hits and misses, one dot a cell. */
  function drawMiniSea(owner, incoming) {
    const cells = [];
    for (let row = 1; row <= 10; row += 1) {
      for (let column = 0; column < 10; column += 1) {
        const cell = `${String.fromCharCode(65 + column)}${row}`;
        const ship = owner.get(cell);
        const shot = incoming.get(cell);
        let kind = 'water';
        if (ship && ship.sunk) kind = 'sunk';
        else if (ship && shot) kind = 'hit';
        else if (ship) kind = 'ship';
        else if (shot) kind = 'miss';
        cells.push(h('i', { class: kind }));
      }
    }
    mount(miniSea, cells);
  }

  /** Marks the latest shot on a sea, so a glance finds it. */
  function withLast(lastCell, describe) {
    return (cell) => {
      const description = describe(cell);
      return cell === lastCell ? { ...description, extra: `${description.extra || ''} last`.trim(), label: `${description.label}, ${t('cell.last')}` } : description;
    };
  }

  /** A sea seen by its attacker: `side` is the attacker's public side; `opened` the fleet after the end. */
  function describeTarget(side, opened, { offered }) {
    return withLast(side.shots.length ? side.shots[side.shots.length - 1].cell : null, describeTargetCell(side, opened, { offered }));
  }

  function describeTargetCell(side, opened, { offered }) {
    const shots = new Map(side.shots.map((shot) => [shot.cell, shot.outcome]));
    const sunkCells = new Map();
    side.sunk.forEach((ship) => ship.cells.forEach((cell) => sunkCells.set(cell, ship)));
    const marked = new Set(side.marked);
    const shapes = shapesOf(side.sunk);
    return (cell) => {
      const sunk = sunkCells.get(cell);
      if (sunk) return { kind: 'sunk', extra: shapes.get(cell), label: sunk.name ? t('cell.sunk_named', { ship: shipName(sunk.name) }) : t('cell.sunk') };
      const outcome = shots.get(cell);
      if (outcome === 'hit') return { kind: 'hit', label: t('cell.hit') };
      if (outcome === 'miss') return { kind: 'miss', label: t('cell.miss') };
      if (marked.has(cell)) return { kind: 'marked', label: t('cell.marked') };
      if (opened.has(cell)) return { kind: 'revealed', extra: opened.get(cell), label: t('cell.revealed') };
      return { kind: 'unknown', offered, label: offered ? t('cell.fire') : t('cell.unknown') };
    };
  }

  function drawTargetSea() {
    const opponent = opponentOf(me());
    const mine = view.sides[seatOf(me())];
    const canFire = view.phase === 'battle' && view.turn === me() && !busy;
    targetBoard.interactive = canFire;
    targetBoard.setShips(mine.sunk.map((ship) => ({ cells: ship.cells, name: ship.name, tone: 'them', sunk: true })));
    targetBoard.update(describeTarget(mine, openedFleet(opponent), { offered: canFire }));
    mount(targetSide, sunkList(mine), shotLog(mine.shots, t('log.yours'), 'shot-log-mine'));
  }

  /** Every shot of one side, newest first, numbered: a log that nothing overwrites. */
  function shotLog(shots, title, testId) {
    if (!shots.length) return null;
    const entries = shots.map((shot, index) => h('li', { class: shot.outcome },
      h('span', { class: 'n' }, `${index + 1}.`), h('span', {}, shot.cell), h('span', {}, t(`log.${shot.outcome}`)))).reverse();
    return [h('h3', { class: 'shot-log-title', id: `${testId}-title` }, title),
      h('ol', { class: 'shot-log', 'data-testid': testId, tabindex: '0', 'aria-labelledby': `${testId}-title`, reversed: true }, entries)];
  }

  function sunkList(side) {
    const named = side.sunk.filter((ship) => ship.name);
    return h('p', { class: 'sunk-count', 'data-testid': 'sunk-count' },
      t('fleet.sunk_count', { sunk: side.sunk.length, total: preset.fleet.length }),
      named.length ? [': ', named.map((ship) => shipName(ship.name)).join(', ')] : '');
  }

  function drawSpectatorSeas() {
    const [first, second] = view.players;
    // The sea of the second player shows the first player's shots, and the other way round.
    // The seas in the title's order, each named: the first player's sea shows the second's shots.
    ownCaption.replaceChildren(t('board.sea_of'), ' ', playerLink(first, { link: false }));
    targetCaption.replaceChildren(t('board.sea_of'), ' ', playerLink(second, { link: false }));
    ownBoard.interactive = false;
    targetBoard.interactive = false;
    ownBoard.setShips(view.sides[1].sunk.map((ship) => ({ cells: ship.cells, name: ship.name, tone: 'me', sunk: true })));
    targetBoard.setShips(view.sides[0].sunk.map((ship) => ({ cells: ship.cells, name: ship.name, tone: 'them', sunk: true })));
    ownBoard.update(describeTarget(view.sides[1], openedFleet(first), { offered: false }));
    targetBoard.update(describeTarget(view.sides[0], openedFleet(second), { offered: false }));
    mount(ownSide, sunkList(view.sides[1]), shotLog(view.sides[1].shots, [t('log.shots_by'), ' ', playerLink(second, { link: false })], 'shot-log-1'));
    mount(targetSide, sunkList(view.sides[0]), shotLog(view.sides[0].shots, [t('log.shots_by'), ' ', playerLink(first, { link: false })], 'shot-log-0'));
  }

  function drawControls() {
    const parts = [];
    if (view.phase === 'waiting') {
      if (participant()) {
        parts.push(h('p', {}, t('waiting.share')), h('input', { class: 'share', readonly: true, value: location.href, 'aria-label': t('waiting.link'), onfocus: (event) => event.target.select() }),
          h('button', { type: 'button', class: 'secondary', 'data-testid': 'withdraw', onclick: () => command(() => app.api.resign(id)) }, t('waiting.withdraw')));
      } else if (!view.invited || view.invited === app.me.id) {
        parts.push(h('div', { class: 'buttons' },
          h('button', { type: 'button', onclick: () => command(() => app.api.join(id)) }, t('lobby.join')),
          view.invited === app.me.id ? h('button', { type: 'button', class: 'secondary', 'data-testid': 'decline', onclick: () => command(() => app.api.decline(id)) }, t('lobby.decline')) : null));
      }
    } else if (participant() && view.phase === 'placement') {
      parts.push(placementControls());
    }
    if (view.phase === 'battle' || isOver(view)) parts.push(legend());
    if (participant() && (view.phase === 'placement' || view.phase === 'battle')) {
      parts.push(h('div', { class: 'resign' }, confirmResign
        ? [h('button', { type: 'button', class: 'danger', onclick: () => { confirmResign = false; command(() => app.api.resign(id)); } }, t('resign.confirm')),
          h('button', { type: 'button', class: 'secondary', onclick: () => { confirmResign = false; drawControls(); } }, t('resign.cancel'))]
        : h('button', { type: 'button', class: 'secondary', onclick: () => { confirmResign = true; drawControls(); } }, t('resign.button'))));
    }
    controls.hidden = parts.length === 0;
    const focused = document.activeElement && controls.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
    mount(controls, parts);
    if (focused) { const again = controls.querySelector(`[data-focus-key="${focused}"]`); if (again) again.focus(); }
  }

  function legend() {
    const extra = preset.sink_reveals && preset.sink_reveals.mark_ring ? [['marked', t('cell.marked')]] : [];
    const entries = [['ship', participant() ? t('legend.ship') : t('legend.ship_any')], ['miss', t('cell.miss')], ['hit', t('cell.hit')], ['sunk', t('legend.sunk')], ...extra];
    return h('div', { class: 'legend' }, h('h2', {}, t('legend.title')),
      h('ul', {}, entries.map(([kind, label]) => h('li', {}, h('span', { class: `cell swatch ${kind}`, 'aria-hidden': 'true' }), label))),
      extraShotRule() ? h('p', { class: 'muted' }, t('rules.extra_yes')) : h('p', { class: 'muted' }, t('rules.extra_no')),
      participant() && view.phase === 'battle' ? h('p', { class: 'muted' }, t('legend.keys')) : null);
  }

  function placementControls() {
    const locked = view.fleet_locked;
    // While a layout is shown (drawn at random, or the last ship held for review) nothing is
    // "next": every ship has its place, placed by hand or in the layout.
    const next = draft ? null : view.next_ship;
    const spotOf = (ship) => ship.placement || (draft && draft.get(ship.index)) || null;
    const sameClass = next ? view.fleet.filter((ship) => ship.name === next.name) : [];
    const counter = sameClass.length > 1 ? t('placement.of_class', { n: sameClass.findIndex((ship) => ship.index === next.index) + 1, count: sameClass.length }) : '';
    const placedCount = view.fleet.filter(spotOf).length;
    const help = draft ? t(draftKind === 'review' ? 'placement.review_help' : 'placement.draft_help') : t('placement.help');
    return h('div', { class: 'placement' },
      h('h2', {}, locked ? t('placement.ready') : draft && draftKind === 'review' ? t('placement.review') : t('placement.title')),
      next ? h('p', { class: 'next-ship', 'data-testid': 'next-ship' }, t('placement.next', { ship: shipName(next.name), length: next.length }),
        counter ? h('span', { class: 'ship-count', 'data-testid': 'ship-count' }, ` — ${counter}`) : null) : null,
      !locked ? h('p', { class: 'muted small-text', 'data-testid': 'placed-count' }, t('placement.placed_count', { placed: placedCount, total: view.fleet.length })) : null,
      placeNote,
      !locked ? h('div', { class: 'buttons' },
        draft ? null : h('button', { type: 'button', class: 'secondary', 'data-focus-key': 'rotate', 'data-testid': 'rotate', 'aria-keyshortcuts': 'R', onclick: rotate },
          t('placement.rotate', { orientation: t(`orientation.${orientation}`) }), h('span', { class: 'key-hint' }, ' (R)')),
        draft ? h('button', { type: 'button', 'data-focus-key': 'ready', 'data-testid': 'ready', onclick: placeDraft }, t('placement.ready_button')) : null,
        draftKind === 'review' && draft ? null : h('button', { type: 'button', class: 'secondary', 'data-focus-key': 'reroll', 'data-testid': 'reroll', onclick: () => { rollDraft(); draw(); } },
          draft ? t('placement.reroll') : view.fleet.some((ship) => ship.placement) ? t('placement.random_rest') : t('placement.random')),
        draft && draftKind === 'random' ? h('button', { type: 'button', class: 'secondary', 'data-focus-key': 'by-hand', 'data-testid': 'by-hand', onclick: () => { draft = null; setNote(''); draw(); } }, t('placement.by_hand')) : null) : null,
      !locked ? h('p', { class: 'muted hint-text' }, help) : null,
      !locked && isBotGame(id) ? h('p', { class: 'muted small-text', 'data-testid': 'bot-game-note' }, t('botgame.leave_note')) : null,
      h('ol', { class: 'ship-list', 'data-testid': 'ship-list' }, view.fleet.map((ship) => {
        const spot = spotOf(ship);
        const where = spot ? `${spot.cell} ${t(`orientation.${spot.orientation}`)}` : t('placement.not_placed');
        const drafted = !ship.placement && spot;
        return h('li', { class: spot ? 'placed' : next && next.index === ship.index ? 'next' : '', 'data-state': ship.placement ? 'placed' : drafted ? 'drafted' : 'unplaced' },
          h('span', { class: 'ship-bar', 'aria-hidden': 'true' }, Array.from({ length: ship.length }, () => h('i'))),
          h('span', { class: 'grow' }, shipName(ship.name), ' ', h('span', { class: 'muted' }, where, drafted && draftKind === 'random' ? ` (${t('placement.drawn')})` : '')),
          ship.placement && !locked ? h('button', { type: 'button', class: 'link', 'data-focus-key': `pick-${ship.index}`, onclick: () => pickUp(ship) }, t('placement.pick_up')) : null,
          drafted && draftKind === 'review' ? h('button', { type: 'button', class: 'link', 'data-focus-key': `pick-${ship.index}`, onclick: () => { draft = null; setNote(''); draw(); } }, t('placement.pick_up')) : null);
      })),
      h('p', { class: `opponent-state ${view.opponent_fleet_locked ? 'ready' : ''}`, 'data-testid': 'opponent-state' },
        view.opponent_fleet_locked ? t('placement.opponent_ready') : t('placement.opponent_placing')));
  }

  function setNote(text) {
    if (placeNote.textContent !== text) placeNote.textContent = text;
  }

  /** Shakes a refused cell once (its class is redrawn with the board, so it is set after). */
  function shake(cell) {
    const button = ownBoard.buttons.get(cell);
    if (!button) return;
    button.classList.remove('refused');
    void button.offsetWidth;
    button.classList.add('refused');
    setTimeout(() => button.classList.remove('refused'), 450);
  }

  /** A cell that is not offered was pressed while placing by hand: say why. */
  function refusedCell(cell) {
    if (!view || view.phase !== 'placement' || !participant() || view.fleet_locked || draft || suppressClick) return;
    const next = view.next_ship;
    if (!next) return;
    setNote(t('placement.illegal', { ship: shipName(next.name), cell, orientation: t(`orientation.${orientation}`) }));
    shake(cell);
  }

  function drawEnding() {
    if (!isOver(view)) { ending.hidden = true; return; }
    ending.hidden = false;
    const result = view.result || {};
    const banner = h('div', { class: `result-banner ${participant() && result.winner === me() ? 'won' : result.winner ? 'lost' : 'draw'}`, 'data-testid': 'result' }, resultText());
    const parts = [banner, ratingLine()];
    if (view.phase === 'finished') {
      parts.push(h('div', { class: 'end-actions' },
        participant() ? rematchControls() : null,
        h('a', { class: 'button secondary', href: `#/m/${id}/replay`, 'data-testid': 'replay-link' }, t('end.replay')),
        h('a', { class: 'button secondary', href: '#/' }, t('nav.back'))));
      parts.push(summaryTable(), commitments());
    } else {
      parts.push(h('div', { class: 'end-actions' }, h('a', { class: 'button secondary', href: '#/' }, t('nav.back'))));
    }
    mount(ending, parts);
  }

  function commitments() {
    if (!view.record) return null;
    const checks = view.record.map((opened) => verified && verified.get(opened.player));
    const verdict = checks.some((check) => !check) ? t('end.checking')
      : checks.every((check) => check.matches) ? t('end.all_verified') : t('end.some_mismatch');
    // Folded away: the proof is there for whoever wants it, the summary comes first.
    return h('details', { class: 'commitments', 'data-testid': 'commitments' },
      h('summary', {}, h('strong', {}, t('end.commitments')), ' — ', h('span', { 'data-testid': 'commitments-verdict' }, verdict)),
      h('p', { class: 'muted' }, t('end.commitments_help')),
      view.record.map((opened) => {
        const check = verified && verified.get(opened.player);
        const ok = check && check.matches;
        return h('div', { class: `commitment ${check ? (ok ? 'ok' : 'bad') : ''}`, 'data-testid': 'commitment' },
          h('strong', {}, playerLink(opened.player)), ' ',
          h('span', { class: 'verdict' }, !check ? t('end.checking') : ok ? t('end.verified') : opened.commitment ? t('end.mismatch') : t('end.no_commitment')),
          opened.commitment ? h('details', {},
            h('summary', {}, t('end.details')),
            h('dl', {},
              h('dt', {}, t('end.published')), h('dd', {}, h('code', {}, opened.commitment)),
              h('dt', {}, t('end.salt')), h('dd', {}, h('code', {}, opened.salt || '—')),
              h('dt', {}, t('end.text')), h('dd', {}, h('code', {}, check && check.text ? check.text : '—')),
              h('dt', {}, t('end.computed')), h('dd', {}, h('code', {}, check && check.computed ? check.computed : '—')))) : null);
      }));
  }

  async function verifyRecord() {
    if (!view.record) return;
    const results = new Map();
    for (const opened of view.record) results.set(opened.player, await verifyFleet(view.ruleset, opened));
    if (!alive) return;
    verified = results;
    drawEnding();
  }

  /** Why a cancelled match was cancelled (declined, withdrawn, not joined): from its last event. */
  async function loadCancelReason() {
    if (view.phase !== 'cancelled') return;
    try {
      const events = await app.api.events(id, Math.max(0, view.seq - 2));
      const cancelled = (Array.isArray(events) ? events : events.events || []).find((event) => event.kind === 'match_cancelled');
      if (!cancelled || !alive) return;
      cancelReason = cancelled.reason;
      drawStatus();
      drawEnding();
    } catch {
      // "Cancelled" alone is still true.
    }
  }

  // --- the end-of-game summary, from the match's own events ---
  /** Each player's shots, hits, accuracy, longest run of hits, time used on the shot clock and rating change. */
  async function loadSummary() {
    if (view.phase !== 'finished') return;
    try {
      const events = [];
      for (let after = 0; ;) {
        const page = await app.api.events(id, after);
        const list = Array.isArray(page) ? page : page.events || [];
        events.push(...list);
        if (list.length < 500) break;
        after = list[list.length - 1].seq;
      }
      if (!alive) return;
      summary = summarise(events, view.players);
      drawEnding();
    } catch {
      // The result stands without it.
    }
  }

  function summaryTable() {
    if (!summary) return null;
    const order = seatOrder();
    const rows = [
      ['shots', (s) => String(s.shots)],
      ['hits', (s) => String(s.hits)],
      ['accuracy', (s) => (s.shots ? `${Math.round((100 * s.hits) / s.shots)} %` : '—')],
      ['streak', (s) => String(s.streak)],
      ['time', (s) => durationText(s.timeMs)],
      ['rating', (s) => (s.rating === null ? '—' : s.rating >= 0 ? `+${s.rating}` : `−${-s.rating}`)],
    ];
    return h('section', { class: 'summary-panel panel', 'data-testid': 'summary' },
      h('h2', {}, t('end.summary')),
      h('div', { class: 'table-wrap' }, h('table', { class: 'summary-table' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('end.summary'))),
          order.map((player) => h('th', { scope: 'col' }, participant() && player === me() ? t('end.you') : playerLink(player, { link: false }))))),
        h('tbody', {}, rows.map(([key, show]) => h('tr', {},
          h('th', { scope: 'row' }, t(`summary.${key}`)),
          order.map((player) => h('td', { class: 'num', 'data-stat': key, 'data-player': player }, show(summary.get(player))))))))));
  }

  // --- the rating after a ranked match ---
  async function loadRatingChange() {
    if (!view.ranked || !participant() || view.phase !== 'finished') return;
    try {
      const events = await app.api.events(id, Math.max(0, view.seq - 8));
      const update = (Array.isArray(events) ? events : events.events || []).find((event) => event.kind === 'rating_updated');
      const change = update && (update.changes || []).find((entry) => entry.player === me());
      if (!change || !alive) return;
      ratingChange = { before: change.before.rating, after: change.after.rating };
      view.players.forEach(forgetProfile);
      playersBar.dataset.key = '';
      drawPlayers();
      drawEnding();
    } catch {
      // The result stands without it.
    }
  }

  function ratingLine() {
    if (!ratingChange) return null;
    const before = Math.round(ratingChange.before);
    const after = Math.round(ratingChange.after);
    const change = after - before;
    return h('p', { class: 'rating-change', 'data-testid': 'rating-change' },
      t('end.rating', { ruleset: rulesetTitle(view.ruleset), before, after, change: change >= 0 ? `+${change}` : `−${-change}` }));
  }

  // --- rematch ---
  async function loadRematch() {
    if (!view || !participant() || view.phase !== 'finished') return;
    try {
      rematch = await app.api.rematchState(id);
      if (alive) drawEnding();
    } catch {
      rematch = null;
    }
  }

  function rematchControls() {
    const offers = rematch ? rematch.offers || [] : [];
    if (rematch && rematch.status === 'started' && rematch.rematch_id) {
      return h('a', { class: 'button', href: `#/m/${rematch.rematch_id}` }, t('rematch.open'));
    }
    const mine = offers.some((offer) => offer.player === me());
    const theirs = offers.some((offer) => offer.player !== me());
    return h('span', { class: 'rematch' },
      theirs ? h('span', { class: 'badge invite' }, t('rematch.offered_to_you')) : null,
      h('button', { type: 'button', 'data-testid': 'rematch', disabled: mine, onclick: askRematch }, mine ? t('rematch.waiting') : theirs ? t('rematch.accept') : t('rematch.offer')));
  }

  async function askRematch() {
    try {
      rematch = await app.api.rematch(id);
      if (rematch.status === 'started' && rematch.rematch_id) app.navigate(`#/m/${rematch.rematch_id}`);
      else drawEnding();
    } catch (error) {
      app.error(error);
    }
  }

  // --- commands ---
  async function command(run) {
    try {
      const answer = await run();
      if (answer && answer.id === id && typeof answer.seq === 'number') accept(answer);
      else refresh();
      return answer;
    } catch (error) {
      app.error(error);
      // A refusal changes nothing on the server: draw what the page holds again, then read.
      draw();
      refresh();
      return null;
    }
  }

  function ownCell(cell) {
    if (!view || view.phase !== 'placement' || !participant() || view.fleet_locked || suppressClick) return;
    if (draft) return;
    const ship = view.fleet.find((candidate) => candidate.cells.includes(cell));
    if (ship) { setNote(''); pickUp(ship); return; }
    const next = view.next_ship;
    if (!next) return;
    setNote('');
    // The last ship is held here for a review: placing it through the API would lock the fleet.
    if (view.fleet.filter((candidate) => !candidate.placement).length === 1) {
      draft = new Map([[next.index, { cell, orientation }]]);
      draftKind = 'review';
      draw();
      return;
    }
    command(() => app.api.placeShip(id, next.index, cell, orientation));
  }

  function pickUp(ship) {
    if (ship.placement) orientation = ship.placement.orientation;
    command(() => app.api.removeShip(id, ship.index));
  }

  function rotate() {
    orientation = orientation === 'horizontal' ? 'vertical' : 'horizontal';
    draw();
  }

  /** The unplaced ships as the draft has them: fleet entries with `cells`, marked `draft`. */
  function draftShips() {
    if (!draft || view.fleet_locked) return [];
    return view.fleet.filter((ship) => !ship.placement && draft.has(ship.index)).map((ship) => {
      const spot = draft.get(ship.index);
      return { ...ship, draft: true, spot, cells: shipCells(spot.cell, spot.orientation, ship.length) };
    });
  }

  /** Draws a random layout for the ships not placed by hand, around those that are. */
  function rollDraft() {
    const unplaced = view.fleet.filter((ship) => !ship.placement);
    const fixed = view.fleet.filter((ship) => ship.placement).map((ship) => ship.cells);
    const spots = randomFleet(unplaced.map((ship) => ship.length), preset.ships_may_touch, Math.random, fixed);
    draft = spots ? new Map(unplaced.map((ship, i) => [ship.index, spots[i]])) : null;
    draftKind = 'random';
    setNote('');
  }

  /** Ready: the hand-placed ships where they stand, the draft for the rest; the fleet locks. */
  function placeDraft() {
    const ships = view.fleet.map((ship) => ship.placement || (draft && draft.get(ship.index)));
    if (ships.some((spot) => !spot)) return;
    draft = null;
    command(() => app.api.placeFleet(id, ships.map((spot) => ({ cell: spot.cell, orientation: spot.orientation }))));
  }

  // --- dragging a ship (mouse, pen or touch, through pointer events) ---
  function shipAt(cell) {
    return view.fleet.find((ship) => ship.placement && ship.cells.includes(cell))
      || draftShips().find((ship) => ship.cells.includes(cell)) || null;
  }

  function cellUnder(event) {
    const el = document.elementFromPoint(event.clientX, event.clientY);
    const button = el && el.closest && el.closest('[data-testid=own-board] .cell');
    return button ? button.dataset.cell : null;
  }

  function dragStart(event) {
    if (!view || view.phase !== 'placement' || !participant() || view.fleet_locked) return;
    const cell = event.target.closest && event.target.closest('.cell') ? event.target.closest('.cell').dataset.cell : null;
    const ship = cell && shipAt(cell);
    if (!ship) return;
    const spot = ship.draft ? ship.spot : ship.placement;
    const grab = ship.cells.indexOf(cell);
    drag = { ship, spot, grab, from: cell, target: null, moved: false, pointer: event.pointerId };
  }

  /** The bow that puts the grabbed cell under `cell`, and the cells the ship would cover. */
  function dragTarget(cell) {
    const { col, row } = parseCell(cell);
    const horizontal = drag.spot.orientation === 'horizontal';
    const bowCol = horizontal ? col - drag.grab : col;
    const bowRow = horizontal ? row : row - drag.grab;
    if (bowCol < 0 || bowRow < 0) return null;
    const bow = `${'ABCDEFGHIJ'[bowCol]}${bowRow + 1}`;
    const cells = shipCells(bow, drag.spot.orientation, drag.ship.length);
    const others = [...view.fleet.filter((ship) => ship.placement), ...draftShips()]
      .filter((ship) => ship.index !== drag.ship.index).map((ship) => ship.cells);
    return cells && fits(cells, others, preset.ships_may_touch) ? { bow, cells } : null;
  }

  function dragMove(event) {
    if (!drag || event.pointerId !== drag.pointer) return;
    const cell = cellUnder(event);
    if (!cell || cell === drag.from && !drag.moved) return;
    if (!drag.moved) {
      // Captured only once it moves, so a press without a move stays a click on its cell.
      try {
        ownBoard.el.setPointerCapture(event.pointerId);
      } catch {
        // Without capture the drag still follows the pointer while it stays on the board.
      }
    }
    drag.moved = true;
    const spot = dragTarget(cell);
    drag.target = spot ? spot.cells : null;
    drag.bow = spot ? spot.bow : null;
    drawPlacementBoard();
  }

  function dragEnd(event) {
    if (!drag || event.pointerId !== drag.pointer) return;
    const done = drag;
    drag = null;
    if (!done.moved) { drawPlacementBoard(); return; }
    // A drag is not a click: the click that follows the release must not pick the ship up.
    suppressClick = true;
    setTimeout(() => { suppressClick = false; }, 0);
    if (!done.bow) {
      drawPlacementBoard();
      setNote(t('placement.drop_refused', { ship: shipName(done.ship.name) }));
      shake(done.from);
      return;
    }
    setNote('');
    if (done.ship.draft) {
      draft.set(done.ship.index, { cell: done.bow, orientation: done.spot.orientation });
      draw();
    } else {
      command(() => app.api.placeShip(id, done.ship.index, done.bow, done.spot.orientation));
    }
  }
  let suppressClick = false;

  async function fire(cell) {
    if (!view || view.phase !== 'battle' || view.turn !== me() || busy) return;
    busy = true;
    drawTargetSea();
    try {
      const answer = await app.api.shoot(id, cell);
      announce(shotText(t('shot.you'), answer.cell, answer.outcome, answer.sunk_ship));
      play(answer.outcome);
      clockEnd = typeof answer.deadline_ms_left === 'number' ? performance.now() + answer.deadline_ms_left : clockEnd;
    } catch (error) {
      app.error(error);
      // Refused: nothing changed on the server, so the sea is offered again as it stands.
      busy = false;
      drawTargetSea();
    }
    busy = false;
    refresh();
  }

  function shotText(who, cell, outcome, sunkShip) {
    if (outcome === 'sunk') {
      return sunkShip && sunkShip.name ? t('shot.sunk_named', { who, cell, ship: shipName(sunkShip.name) }) : t('shot.sunk', { who, cell });
    }
    return t(`shot.${outcome}`, { who, cell });
  }

  function announce(text) {
    said.textContent = text;
    said.classList.remove('flash');
    void said.offsetWidth;
    said.classList.add('flash');
  }

  /** Tells what an event from the stream says about shots the viewer did not fire. */
  function describeEvent(event) {
    if (view && event && event.kind === 'reaction' && REACTIONS.includes(event.reaction)) { showReaction(event); return; }
    if (!view || event.kind !== 'shot_fired' || event.player === view.you) return;
    nameOf(event.player).then((name) => {
      if (!alive) return;
      announce(shotText(name, event.cell, event.outcome, event.sunk_ship));
      if (participant()) play(event.outcome);
    });
  }

  function keydown(event) {
    if (event.key !== 'r' && event.key !== 'R') return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest('input, select, textarea')) return;
    if (view && participant() && view.phase === 'placement' && !view.fleet_locked) {
      event.preventDefault();
      rotate();
    }
  }

  /**
   * A bot game this browser started, left before its battle began (the player's fleet not
   * yet ready): ended by resigning, so the lobby does not list it as in play while its
   * placement clock runs down. A battle left behind stays, to be resumed; its shot clock
   * ends it.
   */
  function leaveBotGame() {
    if (!view || !participant() || !isBotGame(id)) return;
    if (isOver(view)) { forgetBotGame(id); return; }
    if (view.phase !== 'placement' || view.fleet_locked) return;
    forgetBotGame(id);
    if (app.turns) app.turns.sawEnd(id);
    const opponent = opponentOf(me());
    app.leaving = app.api.resign(id)
      .then(() => nameOf(opponent))
      .then((name) => app.toast(t('botgame.left', { name }), { testId: 'bot-game-left' }))
      .catch((error) => app.error(error));
  }

  document.addEventListener('keydown', keydown);
  ownBoard.el.addEventListener('pointerdown', dragStart);
  ownBoard.el.addEventListener('pointermove', dragMove);
  ownBoard.el.addEventListener('pointerup', dragEnd);
  ownBoard.el.addEventListener('pointercancel', () => { drag = null; if (view) drawPlacementBoard(); });
  const ticker = setInterval(tick, TICK_MS);
  const unsubscribe = app.onNotice((notice) => { if (notice.match_id === id) loadRematch(); });
  load();
  return () => {
    alive = false;
    leaveBotGame();
    app.pageTurn = false;
    app.updateTitle();
    if (stream) stream.close();
    clearInterval(ticker);
    clearTimeout(revealTimer);
    clearTimeout(reactionTimer);
    document.removeEventListener('keydown', keydown);
    unsubscribe();
  };
}

/**
 * The summary of a finished match from its events: per player the shots fired, the hits
 * (a sinking shot is a hit), the longest run of hits in a row, the time used on the shot
 * clock (from the turn coming to them — the battle's start or the shot before — to their
 * shot) and the rating change of a ranked match (rounded as the ladder shows it).
 */
export function summarise(events, players) {
  const stats = new Map(players.filter(Boolean).map((player) => [player, { shots: 0, hits: 0, streak: 0, run: 0, timeMs: 0, rating: null }]));
  let turnFrom = null;
  for (const event of events) {
    if (event.kind === 'battle_started') turnFrom = Date.parse(event.at);
    if (event.kind === 'shot_fired' && stats.has(event.player)) {
      const s = stats.get(event.player);
      const at = Date.parse(event.at);
      s.shots += 1;
      if (turnFrom !== null) s.timeMs += Math.max(0, at - turnFrom);
      turnFrom = at;
      if (event.outcome === 'hit' || event.outcome === 'sunk') {
        s.hits += 1;
        s.run += 1;
        s.streak = Math.max(s.streak, s.run);
      } else {
        s.run = 0;
      }
    }
    if (event.kind === 'rating_updated') {
      for (const change of event.changes || []) {
        if (stats.has(change.player)) stats.get(change.player).rating = Math.round(change.after.rating) - Math.round(change.before.rating);
      }
    }
  }
  return stats;
}

/** A duration as m:ss (whole seconds, rounded). */
export function durationText(ms) {
  const total = Math.round(ms / 1000);
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, '0')}`;
}
