// Ships drawn as ships: one SVG per ship laid over its cells (the hull itself stays the
// cells' own shape, so its colours and contrasts are the board's), with the deck of its
// class — a carrier's flight deck and island, a battleship's turrets, a submarine's
// conning tower — horizontal or vertical, bow first. Decorative: the cells carry the names.

const SVG = 'http://www.w3.org/2000/svg';

/** A ship's class from its length, or its name where one length holds two classes. */
export function shipClass(length, name = '') {
  if (/submarine|sottomarino|podwodny/i.test(name)) return 'submarine';
  return { 5: 'carrier', 4: 'battleship', 3: 'cruiser', 2: 'destroyer', 1: 'boat' }[length] || 'cruiser';
}

function node(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

/** A gun turret at x (deck units): a disc with its barrel towards the bow (left). */
const turret = (x) => [node('circle', { cx: x, cy: 50, r: 13 }), node('rect', { x: x - 34, y: 46, width: 26, height: 8, rx: 3 })];

/** The deck of one class, horizontal, bow at x = 0, in a band 100 high and 100 a cell long. */
function deck(kind, length) {
  const end = length * 100;
  switch (kind) {
    case 'carrier':
      return [
        // The flight deck's centre line, dashed, and the island to starboard near the stern.
        node('path', { d: `M40 50H${end - 190}`, 'stroke-width': 6, 'stroke-dasharray': '18 14', fill: 'none', stroke: 'currentColor' }),
        node('rect', { x: end - 170, y: 24, width: 70, height: 20, rx: 4 }),
        node('rect', { x: end - 145, y: 20, width: 12, height: 10, rx: 2 }),
      ];
    case 'battleship':
      return [...turret(95), ...turret(175), node('rect', { x: 215, y: 34, width: 70, height: 32, rx: 6 }), ...turret(340)];
    case 'cruiser':
      return [...turret(85), node('rect', { x: 125, y: 36, width: 60, height: 28, rx: 6 }), node('circle', { cx: 225, cy: 50, r: 9 })];
    case 'submarine':
      return [
        node('rect', { x: end / 2 - 40, y: 34, width: 70, height: 32, rx: 14 }),
        node('path', { d: `M${end / 2 + 8} 50V24`, 'stroke-width': 6, stroke: 'currentColor' }),
        node('path', { d: `M45 50H${end / 2 - 55}M${end / 2 + 45} 50H${end - 45}`, 'stroke-width': 4, stroke: 'currentColor', 'stroke-dasharray': '10 10' }),
      ];
    case 'destroyer':
      return [...turret(70), node('rect', { x: 100, y: 36, width: 55, height: 28, rx: 6 })];
    default:
      return [node('rect', { x: 32, y: 38, width: 40, height: 24, rx: 8 })];
  }
}

/** The art of one ship: an SVG spanning its cells, drawn in `currentColor`. */
export function shipArt(kind, length, orientation) {
  const horizontal = orientation !== 'vertical';
  const svg = node('svg', {
    viewBox: horizontal ? `0 0 ${length * 100} 100` : `0 0 100 ${length * 100}`,
    preserveAspectRatio: 'none', 'aria-hidden': 'true', focusable: 'false',
    class: `ship-art ship-${kind} ${horizontal ? 'h' : 'v'}`,
  });
  // Drawn horizontally, then turned a quarter for a vertical ship (the bow stays first).
  const group = node('g', { fill: 'currentColor', transform: horizontal ? '' : 'matrix(0 1 1 0 0 0)' });
  for (const part of deck(kind, length)) group.append(part);
  svg.append(group);
  svg.dataset.kind = kind;
  return svg;
}
