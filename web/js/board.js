// One 10×10 sea as a group of buttons. Each cell's accessible name is its coordinate and
// state ("B7, hit"); arrow keys move between cells (one tab stop per sea), Enter or Space
// fires or places. Cells that are not offered are aria-disabled and do nothing.

import { h } from './dom.js';
import { ALL_CELLS, COLUMNS, SIZE, cellName, parseCell } from './cells.js';
import { shipArt, shipClass } from './ships.js';

/** Puts `el` on the grid at column `col`, row `row` (1-based), spanning `width` × `height`. */
function place(el, col, row, width = 1, height = 1) {
  // Set through the CSSOM: the page's policy allows no style attributes.
  el.style.gridColumn = `${col} / span ${width}`;
  el.style.gridRow = `${row} / span ${height}`;
}

export class Board {
  /**
   * @param {object} options
   * @param {string} options.label     the sea's accessible name
   * @param {string} [options.owner]   'me' or 'them': whose colours the ships take
   * @param {(cell: string) => void} [options.onActivate]
   * @param {(cell: string|null) => void} [options.onHover]
   */
  constructor({ label, owner = 'me', onActivate, onHover, onRefused, testId }) {
    this.onActivate = onActivate || (() => {});
    this.onRefused = onRefused || (() => {});
    this.onHover = onHover || (() => {});
    this.buttons = new Map();
    this.focusCell = 'A1';
    const grid = h('div', { class: `board owner-${owner}`, role: 'group', 'aria-label': label, 'data-testid': testId });
    // Every item has its place on the grid, so the ships' art can lie over the cells.
    const corner = h('span', { class: 'corner', 'aria-hidden': 'true' });
    place(corner, 1, 1);
    grid.append(corner);
    [...COLUMNS].forEach((letter, col) => {
      const axis = h('span', { class: 'axis', 'aria-hidden': 'true' }, letter);
      place(axis, col + 2, 1);
      grid.append(axis);
    });
    for (let row = 0; row < SIZE; row += 1) {
      const axis = h('span', { class: 'axis', 'aria-hidden': 'true' }, String(row + 1));
      place(axis, 1, row + 2);
      grid.append(axis);
      for (let col = 0; col < SIZE; col += 1) {
        const name = cellName(col, row);
        const button = h('button', {
          type: 'button',
          class: 'cell',
          tabindex: name === this.focusCell ? '0' : '-1',
          'data-cell': name,
          onclick: () => this.activate(name),
          onmouseenter: () => { this.aim(name); this.onHover(name); },
          onfocus: () => { this.setFocus(name, false); this.aim(name); this.onHover(name); },
          onblur: () => this.aim(null),
          onkeydown: (event) => this.key(event, name),
        });
        this.buttons.set(name, button);
        place(button, col + 2, row + 2);
        grid.append(button);
      }
    }
    grid.addEventListener('mouseleave', () => { this.aim(null); this.onHover(null); });
    this.el = grid;
  }

  activate(name) {
    const button = this.buttons.get(name);
    if (button.getAttribute('aria-disabled') === 'true') { this.onRefused(name); return; }
    this.onActivate(name);
  }

  /** Marks the cell being aimed at (pointer over it or keyboard focus on it); styled only where it is offered. */
  aim(name) {
    if (this.aimed === name) return;
    if (this.aimed) this.buttons.get(this.aimed).removeAttribute('data-aim');
    this.aimed = name;
    if (name) this.buttons.get(name).setAttribute('data-aim', '');
  }

  setFocus(name, move = true) {
    const previous = this.buttons.get(this.focusCell);
    if (previous) previous.tabIndex = -1;
    this.focusCell = name;
    const button = this.buttons.get(name);
    button.tabIndex = 0;
    if (move) button.focus();
  }

  key(event, name) {
    const { col, row } = parseCell(name);
    const moves = {
      ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1],
      Home: [-col, 0], End: [SIZE - 1 - col, 0],
    };
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    const c = Math.min(SIZE - 1, Math.max(0, col + move[0]));
    const r = Math.min(SIZE - 1, Math.max(0, row + move[1]));
    this.setFocus(cellName(c, r));
  }

  /** Redraws every cell from `describe(cell) → {kind, label, offered, mark}`. */
  update(describe) {
    for (const name of ALL_CELLS) {
      const { kind, label, offered = false, extra = '' } = describe(name);
      const button = this.buttons.get(name);
      const className = `cell ${kind}${extra ? ` ${extra}` : ''}`;
      if (button.className.replace(/ fresh-\w+/, '') !== className) {
        // A cell that has just been fired at plays its splash, hit or sink once.
        const landed = /\b(miss|hit|sunk|sunk-own)\b/.exec(kind);
        const before = button.className;
        const fresh = this.drawn && landed && !new RegExp(`\\b${landed[1]}\\b`).test(before) ? ` fresh-${landed[1] === 'sunk-own' ? 'sunk' : landed[1]}` : '';
        button.className = className + fresh;
      }
      const accessible = `${name}, ${label}`;
      if (button.getAttribute('aria-label') !== accessible) button.setAttribute('aria-label', accessible);
      const disabled = offered ? 'false' : 'true';
      if (button.getAttribute('aria-disabled') !== disabled) button.setAttribute('aria-disabled', disabled);
    }
    // The first picture of a sea is not news: only later changes animate.
    this.drawn = true;
  }

  /**
   * Draws the ships as ships over their cells: `ships` is [{cells, name, tone, sunk}] with
   * `tone` one of 'me', 'them', 'sunk-me' (which hull colour the art stands on); a ship
   * newly sunk plays its sinking.
   */
  setShips(ships) {
    const key = ships.map((ship) => `${ship.cells.join('.')}:${ship.tone}:${ship.sunk ? 's' : ''}:${ship.name || ''}`).join('|');
    if (key === this.shipsKey) return;
    const wasSunk = new Set((this.arts || []).filter((art) => art.classList.contains('sunk-art')).map((art) => art.dataset.cells));
    const first = this.shipsKey === undefined;
    this.shipsKey = key;
    for (const art of this.arts || []) art.remove();
    this.arts = ships.filter((ship) => ship.cells && ship.cells.length).map((ship) => {
      const cells = ship.cells.map(parseCell);
      const col = Math.min(...cells.map((cell) => cell.col));
      const row = Math.min(...cells.map((cell) => cell.row));
      const vertical = cells.length > 1 && cells[0].col === cells[1].col;
      const art = shipArt(shipClass(cells.length, ship.name), cells.length, vertical ? 'vertical' : 'horizontal');
      art.classList.add(`tone-${ship.tone}`);
      art.dataset.cells = ship.cells.join('.');
      if (ship.sunk) {
        art.classList.add('sunk-art');
        // A ship going down now (not one already sunk when the sea was first drawn) sinks.
        if (!first && !wasSunk.has(art.dataset.cells)) art.classList.add('sinking');
      }
      place(art, col + 2, row + 2, vertical ? 1 : cells.length, vertical ? cells.length : 1);
      this.el.append(art);
      return art;
    });
  }

  set interactive(on) {
    this.el.classList.toggle('interactive', on);
  }
}
