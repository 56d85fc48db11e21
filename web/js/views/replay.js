// The replay of a match, event by event, from its public record (GET …/events): both
// seas with the ships as placed at that moment and the shots fired so far.

import { h, mount } from '../dom.js';
import { t, rulesetTitle, shipName } from '../i18n.js';
import { Board } from '../board.js';
import { shipCells, shipShape } from '../cells.js';
import { nameOf, playerLink, rememberNames } from '../names.js';

const PAGE = 500;
const PLAY_MS = 700;

export function render(app, main, id) {
  let alive = true;
  let events = [];
  let view = null;
  let preset = null;
  let step = 0;
  let playing = null;
  const names = new Map();

  const boards = [0, 1].map((seat) => new Board({ label: t('board.sea_of'), owner: seat ? 'them' : 'me', testId: `replay-board-${seat}` }));
  const captions = [h('h2', { class: 'sea-caption' }), h('h2', { class: 'sea-caption' })];
  const slider = h('input', { type: 'range', min: 0, max: 0, value: 0, 'aria-label': t('replay.position'), oninput: (event) => go(Number(event.target.value)) });
  const position = h('span', { class: 'muted', 'data-testid': 'replay-position' });
  const description = h('p', { class: 'announce', 'aria-live': 'polite', 'data-testid': 'replay-event' });
  const playButton = h('button', { type: 'button', class: 'secondary', onclick: togglePlay }, t('replay.play'));

  // Laid out but not shown until the record is read (2 s at most), so nothing jumps as it fills.
  const replayEl = h('div', { class: 'match replay pending', 'data-testid': 'replay' },
    h('header', { class: 'match-head' }, h('h1', {}, t('replay.title')), h('a', { href: `#/m/${id}` }, t('replay.back'))),
    h('div', { class: 'replay-controls panel' },
      h('button', { type: 'button', class: 'secondary', 'aria-label': t('replay.first'), onclick: () => go(0) }, '|◀'),
      h('button', { type: 'button', class: 'secondary', 'data-testid': 'replay-prev', 'aria-label': t('replay.prev'), onclick: () => go(step - 1) }, '◀'),
      playButton,
      h('button', { type: 'button', class: 'secondary', 'data-testid': 'replay-next', 'aria-label': t('replay.next'), onclick: () => go(step + 1) }, '▶'),
      h('button', { type: 'button', class: 'secondary', 'data-testid': 'replay-last', 'aria-label': t('replay.last'), onclick: () => go(events.length) }, '▶|'),
      slider, position),
    description,
    h('div', { class: 'seas' },
      h('section', { class: 'sea' }, captions[0], boards[0].el),
      h('section', { class: 'sea' }, captions[1], boards[1].el)));
  mount(main, replayEl);
  const reveal = () => replayEl.classList.remove('pending');
  const revealTimer = setTimeout(reveal, 2000);

  async function load() {
    try {
      const [rulesets, match] = await Promise.all([app.rulesets(), app.api.match(id)]);
      view = match;
      rememberNames(match);
      preset = rulesets.find((ruleset) => ruleset.id === match.ruleset);
      let after = 0;
      for (;;) {
        const page = await app.api.events(id, after);
        page.forEach(rememberNames);
        events = events.concat(page);
        if (page.length < PAGE) break;
        after = page[page.length - 1].seq;
      }
      if (!alive) return;
      await Promise.all(view.players.map(async (player) => names.set(player, await nameOf(player))));
      view.players.forEach((player, seat) => captions[seat].replaceChildren(t('board.sea_of'), ' ', playerLink(player), ' · ', rulesetTitle(view.ruleset)));
      slider.max = String(events.length);
      go(events.length);
      reveal();
    } catch (error) {
      if (alive) mount(main, h('div', { class: 'panel' }, h('p', { class: 'form-error', role: 'alert' }, error.message)));
    }
  }

  /** The two seas after the first `count` events. */
  function fold(count) {
    const seats = view.players;
    const sea = seats.map(() => ({ ships: [], shots: new Map(), sunk: new Set(), marked: new Set() }));
    for (const event of events.slice(0, count)) {
      const seat = seats.indexOf(event.player);
      if (event.kind === 'ship_placed' && seat >= 0 && event.placement) sea[seat].ships[event.index] = event.placement;
      if (event.kind === 'ship_removed' && seat >= 0) sea[seat].ships[event.index] = null;
      if (event.kind === 'shot_fired' && seat >= 0) {
        const target = sea[1 - seat];
        target.shots.set(event.cell, event.outcome);
        if (event.sunk_ship) event.sunk_ship.cells.forEach((cell) => target.sunk.add(cell));
        (event.marked || []).forEach((cell) => target.marked.add(cell));
      }
    }
    return sea;
  }

  function go(next) {
    step = Math.max(0, Math.min(events.length, next));
    slider.value = String(step);
    position.textContent = t('replay.step', { step, total: events.length });
    description.textContent = step ? describe(events[step - 1]) : t('replay.start');
    const seas = fold(step);
    seas.forEach((sea, seat) => {
      const ships = new Map();
      const shapes = new Map();
      sea.ships.forEach((ship, index) => {
        if (!ship) return;
        for (const [cell, shape] of shipShape(shipCells(ship.cell, ship.orientation, preset.fleet[index].length))) {
          ships.set(cell, index);
          shapes.set(cell, shape);
        }
      });
      boards[seat].update((cell) => {
        const ship = ships.has(cell);
        const shot = sea.shots.get(cell);
        if (sea.sunk.has(cell)) return { kind: 'sunk', extra: shapes.get(cell), label: t('cell.sunk') };
        if (shot === 'hit' && ship) return { kind: 'ship hit', extra: shapes.get(cell), label: t('cell.hit') };
        if (shot === 'hit') return { kind: 'hit', label: t('cell.hit') };
        if (shot === 'miss') return { kind: 'miss', label: t('cell.miss') };
        if (sea.marked.has(cell)) return { kind: 'marked', label: t('cell.marked') };
        if (ship) return { kind: 'ship', extra: shapes.get(cell), label: shipName(preset.fleet[ships.get(cell)].name) };
        return { kind: 'water', label: t('cell.water') };
      });
    });
  }

  function describe(event) {
    const who = names.get(event.player) || '';
    switch (event.kind) {
      case 'match_created': return t('event.match_created', { who: names.get(event.creator) || '' });
      case 'player_joined': return t('event.player_joined', { who });
      case 'ship_placed': return t('event.ship_placed', { who, ship: shipName(preset.fleet[event.index].name), cell: event.placement ? event.placement.cell : '?', orientation: event.placement ? t(`orientation.${event.placement.orientation}`) : '' });
      case 'ship_removed': return t('event.ship_removed', { who, ship: shipName(preset.fleet[event.index].name) });
      case 'fleet_locked': return t('event.fleet_locked', { who });
      case 'battle_started': return t('event.battle_started', { who: names.get(event.first) || '' });
      case 'shot_fired': return event.outcome === 'sunk' && event.sunk_ship && event.sunk_ship.name
        ? t('shot.sunk_named', { who, cell: event.cell, ship: shipName(event.sunk_ship.name) })
        : t(`shot.${event.outcome}`, { who, cell: event.cell });
      case 'match_finished': return event.winner
        ? `${t('result.player_won', { name: names.get(event.winner) || '' })} — ${t(`reason.${event.reason}`)}`
        : `${t('result.draw')} — ${t(`reason.${event.reason}`)}`;
      case 'match_cancelled': return t('result.cancelled');
      case 'rating_updated': return t('event.rating_updated');
      case 'clock_extended': return t('event.clock_extended');
      case 'reaction': return t('event.reaction', { who, reaction: t(`reaction.${event.reaction}`) });
      default: return event.kind;
    }
  }

  function togglePlay() {
    if (playing) { stop(); return; }
    if (step >= events.length) go(0);
    playButton.textContent = t('replay.pause');
    playing = setInterval(() => {
      if (step >= events.length) stop();
      else go(step + 1);
    }, PLAY_MS);
  }

  function stop() {
    clearInterval(playing);
    playing = null;
    playButton.textContent = t('replay.play');
  }

  load();
  return () => { alive = false; stop(); clearTimeout(revealTimer); };
}
