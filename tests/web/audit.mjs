// Checks of one screen as it stands, used by play.mjs: no sideways scroll at 360 px and
// on the desktop, 0 axe-core violations of any impact in the light and the dark theme
// (from `prefers-color-scheme`), and the contrast of every board element against its
// neighbours (WCAG 1.4.11, at least 3:1) computed from the page's own computed styles.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const PHONE = { width: 360, height: 740 };

/** Runs axe-core in the page (evaluated through the debugger protocol, so the page's CSP stays strict). */
async function axeViolations(page) {
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((violation) => `${violation.id} (${violation.impact}): ${violation.nodes.slice(0, 3).map((node) => node.target.join(' ')).join(' | ')}`);
  });
}

/**
 * Every control (link, button, field, summary) that is shown must lie on screen: nothing
 * scrolls to a negative x, so a control pushed off the left edge is otherwise never caught.
 * Controls inside a box that scrolls sideways by design (a wide table) are left out.
 * Returns the controls off screen, described.
 */
export async function controlsOffScreen(page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const scrollsSideways = (el) => {
      for (let node = el.parentElement; node && node !== document.body; node = node.parentElement) {
        const overflow = getComputedStyle(node).overflowX;
        if (overflow === 'auto' || overflow === 'scroll') return true;
      }
      return false;
    };
    return [...document.querySelectorAll('a[href], button, select, input, textarea, summary')]
      .filter((el) => !el.classList.contains('skip') && !el.closest('.visually-hidden') && el.getClientRects().length > 0)
      .filter((el) => { const box = el.getBoundingClientRect(); return box.width > 1 && (box.left < -0.5 || box.right > width + 0.5) && !scrollsSideways(el); })
      .map((el) => { const box = el.getBoundingClientRect(); return `${el.tagName.toLowerCase()}${el.className ? `.${el.className}` : ''} "${(el.textContent || el.value || '').trim().slice(0, 30)}" at x ${Math.round(box.left)}…${Math.round(box.right)}`; });
  });
}

/** The boxes of the header's controls: [text, left, right, top, bottom]. */
export async function headerBoxes(page) {
  return page.evaluate(() => [...document.querySelectorAll('header.top a[href], header.top button, header.top select')]
    .filter((el) => el.getClientRects().length > 0)
    .map((el) => { const box = el.getBoundingClientRect(); return [(el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 24), Math.round(box.left), Math.round(box.right), Math.round(box.top), Math.round(box.bottom)]; }));
}

async function sidewaysScroll(page) {
  return page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
}

/** The elements that stick out to the right of the viewport, to say what to fix. */
async function overflowing(page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    return [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > width + 0.5)
      .slice(0, 6)
      .map((el) => `${el.tagName.toLowerCase()}.${el.className}[${Math.round(el.getBoundingClientRect().right)}]`);
  });
}

/**
 * The contrast pairs of the boards on the page: [what, ratio]. Colours are read from the
 * computed styles (backgrounds, ::before hulls, ::after marks, inset box-shadow rings).
 */
export async function boardContrasts(page) {
  return page.evaluate(() => {
    const parse = (text) => {
      const match = /rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/.exec(text || '');
      if (!match) return null;
      const alpha = match[4] === undefined ? 1 : Number(match[4]);
      return alpha === 0 ? null : [Number(match[1]), Number(match[2]), Number(match[3])];
    };
    const luminance = ([r, g, b]) => {
      const channel = (value) => { const c = value / 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    };
    const ratio = (a, b) => { const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
    const shadowColours = (text) => [...(text || '').matchAll(/rgba?\([^)]*\)/g)].map((m) => parse(m[0])).filter(Boolean);
    const backgroundBehind = (el) => {
      for (let node = el; node; node = node.parentElement) {
        const colour = parse(getComputedStyle(node).backgroundColor);
        if (colour) return colour;
      }
      return [255, 255, 255];
    };
    const pairs = [];
    const add = (what, a, b) => { if (a && b) pairs.push([what, Math.round(ratio(a, b) * 100) / 100]); };
    const first = (selector) => document.querySelector(selector);
    const water = first('.board .cell.water, .board .cell.unknown');
    if (water) {
      const cellColour = parse(getComputedStyle(water).backgroundColor);
      const grid = shadowColours(getComputedStyle(water).boxShadow)[0];
      add('grid line vs page', grid, backgroundBehind(water.parentElement));
      add('grid line vs water', grid, cellColour);
    }
    const waterColour = water ? parse(getComputedStyle(water).backgroundColor) : null;
    // An own hit: a fill inside the hull's rim; the fill against the hull, the rim against the water.
    const ownHit = first('.cell.ship.hit');
    if (ownHit) {
      const fill = parse(getComputedStyle(ownHit, '::before').backgroundColor);
      const rim = shadowColours(getComputedStyle(ownHit, '::before').boxShadow)[0];
      const hull = first('.owner-me .cell.ship:not(.hit):not(.sunk-own)');
      add('own hit segment vs own hull', fill, hull ? parse(getComputedStyle(hull, '::before').backgroundColor) : rim);
      add('own hit segment vs its rim', fill, rim);
      add('own hit rim vs water', rim, waterColour);
    }
    // The decks drawn on the ships (web/js/ships.js) against the hull they lie on.
    for (const art of document.querySelectorAll('.board .ship-art')) {
      const tone = [...art.classList].find((name) => name.startsWith('tone-'));
      const what = `ship deck (${tone.slice(5)}) vs hull`;
      if (pairs.some(([name]) => name === what)) continue;
      const board = art.closest('.board');
      const hullCell = art.dataset.cells.split('.').map((cell) => board.querySelector(`[data-cell="${cell}"]`)).find((cell) => cell && !cell.classList.contains('hit'));
      if (hullCell) add(what, parse(getComputedStyle(art).color), parse(getComputedStyle(hullCell, '::before').backgroundColor));
    }
    // Aiming at a cell of the target sea: the ring and the dot against the water.
    const aimed = first('.board.interactive .cell.unknown[data-aim][aria-disabled="false"]');
    if (aimed) {
      const under = parse(getComputedStyle(aimed).backgroundColor);
      add('aiming ring vs water', shadowColours(getComputedStyle(aimed).boxShadow)[0], under);
      add('aiming dot vs water', parse(getComputedStyle(aimed, '::after').borderTopColor), under);
    }
    for (const [what, selector] of [
      ['own hull vs water', '.owner-me .cell.ship:not(.hit):not(.sunk-own)'],
      ['sunk own hull vs water', '.cell.ship.sunk-own'],
      ['sunk ship vs water', '.cell.sunk'],
      ['placement preview vs water', '.cell.preview'],
    ]) {
      const el = first(selector);
      if (el) add(what, parse(getComputedStyle(el, '::before').backgroundColor), waterColour);
    }
    for (const [what, selector] of [['miss mark vs water', '.cell.miss'], ['bow hint vs water', '.cell.hint']]) {
      const el = first(selector);
      if (el) add(what, parse(getComputedStyle(el, '::after').backgroundColor), parse(getComputedStyle(el).backgroundColor));
    }
    const marked = first('.cell.marked');
    if (marked) add('known-empty mark vs water', parse(getComputedStyle(marked, '::after').color), parse(getComputedStyle(marked).backgroundColor));
    const hit = first('.cell.hit:not(.ship)');
    if (hit) {
      add('hit cell vs water', parse(getComputedStyle(hit).backgroundColor), waterColour);
      add('hit ✕ vs hit cell', parse(getComputedStyle(hit, '::after').color), parse(getComputedStyle(hit).backgroundColor));
    }
    for (const [what, selector] of [['own hit ✕ vs hull', '.cell.ship.hit'], ['sunk ✕ vs hull', '.cell.sunk'], ['own sunk ✕ vs hull', '.cell.ship.sunk-own']]) {
      const el = first(selector);
      if (el) add(what, parse(getComputedStyle(el, '::after').color), parse(getComputedStyle(el, '::before').backgroundColor));
    }
    for (const last of document.querySelectorAll('.board .cell.last')) {
      // The ring is two rings (dark and light): the better of them must stand out from the cell.
      const under = parse(getComputedStyle(last).backgroundColor);
      const best = Math.max(...shadowColours(getComputedStyle(last).boxShadow).map((colour) => ratio(colour, under)));
      pairs.push(['latest-shot ring vs its cell', Math.round(best * 100) / 100]);
    }
    return pairs;
  });
}

/**
 * Audits the screen `name` of `page` at the desktop and at 360 px, in the light and the dark
 * theme: no sideways scroll, no axe violation, board contrasts ≥ 3:1. Returns the
 * contrast pairs measured (so a caller can require the ones its screen must have).
 */
export async function audit(page, name, { log = () => {} } = {}) {
  const size = page.viewportSize();
  const measured = new Map();
  try {
    for (const viewport of [size, PHONE]) {
      await page.setViewportSize(viewport);
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        const where = `${name} at ${viewport.width} px, ${colorScheme}`;
        if (await sidewaysScroll(page) > 0) {
          assert.fail(`${where}: the page scrolls sideways by ${await sidewaysScroll(page)} px: ${(await overflowing(page)).join(', ')}`);
        }
        assert.deepEqual(await controlsOffScreen(page), [], `${where}: every control on screen`);
        assert.deepEqual(await axeViolations(page), [], `${where}: axe-core violations`);
        for (const [what, ratio] of await boardContrasts(page)) {
          assert.ok(ratio >= 3, `${where}: ${what} is ${ratio}:1, under 3:1`);
          measured.set(`${what} (${colorScheme})`, Math.min(ratio, measured.get(`${what} (${colorScheme})`) ?? Infinity));
        }
      }
    }
  } finally {
    await page.setViewportSize(size);
    await page.emulateMedia({ colorScheme: 'light' });
  }
  log(`audited ${name}: ${measured.size ? [...measured].map(([what, ratio]) => `${what} ${ratio}`).join('; ') : 'no board'}`);
  return measured;
}
