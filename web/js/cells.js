// Cells as the API writes them (A1…J10: column letter, then row number), ships as the
// cells they cover, and a random legal fleet for "place at random".

export const SIZE = 10;
export const COLUMNS = 'ABCDEFGHIJ';

export function cellName(col, row) {
  return `${COLUMNS[col]}${row + 1}`;
}

export function parseCell(name) {
  const col = COLUMNS.indexOf(name[0].toUpperCase());
  const row = Number(name.slice(1)) - 1;
  return { col, row };
}

export const ALL_CELLS = Array.from({ length: SIZE * SIZE }, (_, i) => cellName(i % SIZE, Math.floor(i / SIZE)));

/** The cells a ship of `length` covers from bow `cell` in `orientation`, or null when off the board. */
export function shipCells(cell, orientation, length) {
  const { col, row } = parseCell(cell);
  const cells = [];
  for (let i = 0; i < length; i += 1) {
    const c = orientation === 'horizontal' ? col + i : col;
    const r = orientation === 'horizontal' ? row : row + i;
    if (c >= SIZE || r >= SIZE) return null;
    cells.push(cellName(c, r));
  }
  return cells;
}

/** The cells around `cells` (diagonals included), without `cells` themselves. */
export function ring(cells) {
  const inside = new Set(cells);
  const around = new Set();
  for (const name of cells) {
    const { col, row } = parseCell(name);
    for (let dc = -1; dc <= 1; dc += 1) {
      for (let dr = -1; dr <= 1; dr += 1) {
        const c = col + dc;
        const r = row + dr;
        if (c < 0 || r < 0 || c >= SIZE || r >= SIZE) continue;
        const neighbour = cellName(c, r);
        if (!inside.has(neighbour)) around.add(neighbour);
      }
    }
  }
  return around;
}

/**
 * A random legal fleet for ship `lengths` in order: [{cell, orientation}…]. Ships never
 * overlap; unless `mayTouch`, no two touch, diagonals included. The server still checks it.
 */
export function randomFleet(lengths, mayTouch, random = Math.random, fixed = []) {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    // Ships already standing (`fixed`: their cells) stay where they are.
    const taken = new Set(fixed.flat());
    const blocked = new Set();
    if (!mayTouch) fixed.forEach((cells) => ring(cells).forEach((c) => blocked.add(c)));
    const fleet = [];
    for (const length of lengths) {
      const options = [];
      for (const orientation of ['horizontal', 'vertical']) {
        for (const cell of ALL_CELLS) {
          const cells = shipCells(cell, orientation, length);
          if (cells && cells.every((c) => !taken.has(c) && !blocked.has(c))) options.push({ cell, orientation, cells });
        }
      }
      if (!options.length) break;
      const pick = options[Math.floor(random() * options.length)];
      pick.cells.forEach((c) => taken.add(c));
      if (!mayTouch) ring(pick.cells).forEach((c) => blocked.add(c));
      fleet.push({ cell: pick.cell, orientation: pick.orientation });
    }
    if (fleet.length === lengths.length) return fleet;
  }
  return null;
}

/**
 * How each cell of a ship is drawn: `h` or `v` (which way it lies; a one-cell ship has
 * neither) plus `bow` on its first cell and `stern` on its last, as class names.
 */
export function shipShape(cells) {
  const shape = new Map();
  if (!cells || !cells.length) return shape;
  const points = cells.map(parseCell).sort((a, b) => a.col - b.col || a.row - b.row);
  const way = points.length === 1 ? '' : points[0].row === points[1].row ? 'h' : 'v';
  points.forEach((point, index) => {
    const parts = [way];
    if (index === 0) parts.push('bow');
    if (index === points.length - 1) parts.push('stern');
    shape.set(cellName(point.col, point.row), parts.filter(Boolean).join(' '));
  });
  return shape;
}

/** Whether a ship on `cells` may stand beside `others` (lists of cells): no overlap, and no touch unless allowed. */
export function fits(cells, others, mayTouch) {
  if (!cells) return false;
  const near = new Set(others.flat());
  if (!mayTouch) others.forEach((other) => ring(other).forEach((c) => near.add(c)));
  return cells.every((cell) => !near.has(cell));
}
