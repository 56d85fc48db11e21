// Plays Statki in a real browser: two players in two browser contexts register, create
// and join a match, place their fleets (one by hand with rotate and pick-up, one at
// random), fight the battle to the end by mouse and keyboard while a third context
// watches, reload mid-battle, check the result, the commitments verified in the
// browser, the replay and a rematch; then a `classic` match checks the extra shot and
// the marked ring; and a refusal is shown from the problem's `detail`. No console error
// may be logged. With SCREENSHOTS=<dir>, screenshots are saved there.
//
// Usage: STATKI_URL=http://127.0.0.1:8080 node play.mjs

import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { audit, boardContrasts, controlsOffScreen, headerBoxes } from './audit.mjs';

const BASE = process.env.STATKI_URL || 'http://127.0.0.1:8080';
const SCREENSHOTS = process.env.SCREENSHOTS || '';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT = { timeout: 15_000 };
// Longer than the page's turn watcher takes to look once (it polls every 3 s).
const POLL_SETTLE_MS = 3500;
const started = Date.now();
const suffix = Math.random().toString(36).slice(2, 7);

const errors = [];
// Pages taken offline on purpose: their failed loads are the point, not errors.
const offline = new Set();
function log(step) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${step}`);
}

async function newPlayer(browser, label, { locale = 'en-GB', viewport = { width: 1280, height: 900 }, hasTouch = false } = {}) {
  const context = await browser.newContext({ locale, viewport, hasTouch });
  // Counts the WebAudio tones the page synthesises, and lists each cue the audio layer says it
  // played with the tones made for it, so a cue can be seen (and heard) to play by name.
  await context.addInitScript(() => {
    window.statkiTones = 0;
    window.statkiCues = [];
    let tonesBefore = 0;
    window.addEventListener('statki:cue', (event) => {
      window.statkiCues.push({ cue: event.detail.cue, tones: window.statkiTones - tonesBefore });
      tonesBefore = window.statkiTones;
    });
    if (typeof AudioContext === 'undefined') return;
    const createOscillator = AudioContext.prototype.createOscillator;
    AudioContext.prototype.createOscillator = function counted() {
      window.statkiTones += 1;
      return createOscillator.call(this);
    };
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() !== 'error' || offline.has(label)) return;
    // A refused request is logged by Chromium itself; the page shows the refusal.
    if (/^Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) return;
    errors.push(`${label}: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`${label}: ${error.message}`));
  await page.goto(BASE + '/');
  return { context, page, label };
}

/** How many cues the page has played so far: a mark to look for later ones from. */
async function cueMark(page) {
  return page.evaluate(() => window.statkiCues.length);
}

/** Waits for the page to play `cue` (after `mark`), synthesised as tones, and returns it. */
async function heard(page, cue, mark, what) {
  try {
    await page.waitForFunction(([name, from]) => window.statkiCues.slice(from).some((c) => c.cue === name && c.tones > 0), [cue, mark], WAIT);
  } catch (error) {
    throw new Error(`${what}: no '${cue}' cue (${error.message}); heard ${JSON.stringify(await page.evaluate((from) => window.statkiCues.slice(from), mark))}`);
  }
  return page.evaluate(([name, from]) => window.statkiCues.slice(from).find((c) => c.cue === name), [cue, mark]);
}

/** Desktop and phone screenshots of the page, in the light and the dark theme. */
async function shoot(page, name) {
  if (!SCREENSHOTS) return;
  const size = page.viewportSize();
  for (const colorScheme of ['light', 'dark']) {
    const suffix = colorScheme === 'dark' ? '-dark' : '';
    await page.emulateMedia({ colorScheme });
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.screenshot({ path: `${SCREENSHOTS}/${name}-desktop${suffix}.png` });
    await page.setViewportSize({ width: 360, height: 780 });
    await page.screenshot({ path: `${SCREENSHOTS}/${name}-phone${suffix}.png`, fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize(size);
}

async function register(page, name, password) {
  await page.fill('#register-name', name);
  if (password && await page.locator('#register-password').count()) await page.fill('#register-password', password);
  await page.click('[data-testid=register] button[type=submit]');
  await page.waitForSelector('[data-testid=me]', { ...WAIT, state: 'attached' });
  assert.equal(await page.textContent('[data-testid=me]'), name);
}

/** Opens the header's menu where the page folds the account's controls behind it (a phone). */
async function openMenu(page) {
  const toggle = page.locator('[data-testid=menu]');
  if (await toggle.isVisible() && (await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
}

const own = (page, cell) => page.locator(`[data-testid=own-board] [data-cell="${cell}"]`);
const target = (page, cell) => page.locator(`[data-testid=target-board] [data-cell="${cell}"]`);

/** The page's own view of the match, read with its own token (to know where its ships are). */
async function viewOf(page, id) {
  return page.evaluate(async (matchId) => {
    const { token } = JSON.parse(localStorage.getItem('statki.session'));
    const response = await fetch(`/v1/matches/${matchId}`, { headers: { authorization: `Bearer ${token}` } });
    return response.json();
  }, id);
}

function matchIdOf(page) {
  const match = /#\/m\/([0-9a-f-]{36})/.exec(page.url());
  assert.ok(match, `not on a match page: ${page.url()}`);
  return match[1];
}

async function waitNextShip(page, text) {
  await page.waitForFunction((expected) => {
    const el = document.querySelector('[data-testid=next-ship]');
    return el && el.textContent.includes(expected);
  }, text, WAIT);
}

async function createMatch(page, ruleset) {
  await page.goto(BASE + '/#/');
  await page.waitForSelector('[data-testid=create-match]', WAIT);
  await page.selectOption('#create-ruleset', ruleset);
  await page.click('[data-testid=create-match] button[type=submit]');
  await page.waitForURL(/#\/m\//, WAIT);
  return matchIdOf(page);
}

async function joinFromLobby(page, id) {
  await page.goto(`${BASE}/#/?at=${Date.now()}`);
  const row = page.locator(`[data-testid=open-matches] [data-match="${id}"]`);
  await row.waitFor(WAIT);
  await row.locator('button').click();
  await page.waitForURL(new RegExp(`#/m/${id}`), WAIT);
  await page.waitForSelector('[data-testid=own-board]', WAIT);
}

/**
 * Presses "place at random" and waits for the fleet to stand. A press that lands while the
 * page redraws its controls can miss: then it is pressed once more (and the toasts logged).
 */
async function placeAtRandom(page) {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    await page.click('[data-testid=ready]');
    try {
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=own-board] .cell.ship').length > 0 && !document.querySelector('[data-testid=own-board] .cell.draft'), null, { timeout: 4000 });
      return;
    } catch {
      log(`place at random did not take (toasts: ${JSON.stringify(await page.locator('.toast').allTextContents())}); pressing again`);
    }
  }
  throw new Error('place at random never placed the fleet');
}

const centre = async (page, cell) => {
  // In the middle of the screen, clear of the sticky players' bar at the top.
  await page.locator('[data-testid=own-board]').evaluate((el) => el.scrollIntoView({ block: 'center' }));
  const box = await own(page, cell).boundingBox();
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
};

/** Drags with the mouse from one cell of the own sea to another. */
async function mouseDrag(page, from, to) {
  const start = await centre(page, from);
  const end = await centre(page, to);
  await page.mouse.move(start.x, start.y);
  await page.mouse.down();
  await page.mouse.move((start.x + end.x) / 2, (start.y + end.y) / 2, { steps: 4 });
  await page.mouse.move(end.x, end.y, { steps: 4 });
  await page.mouse.up();
}

/**
 * Drags a drafted ship by touch (touch events through the debugger protocol, as a finger
 * would) to a free place; returns where its bow went and its length.
 */
async function touchDragShip(page) {
  const plan = await page.evaluate(() => {
    const cls = (cell) => document.querySelector(`[data-testid=own-board] [data-cell="${cell}"]`).classList;
    const taken = new Set([...document.querySelectorAll('[data-testid=own-board] .cell.ship')].map((el) => el.dataset.cell));
    const letters = 'ABCDEFGHIJ';
    const name = (col, row) => `${letters[col]}${row + 1}`;
    for (const bowEl of document.querySelectorAll('[data-testid=own-board] .cell.ship.draft.bow:is(.h, .v)')) {
      const bow = bowEl.dataset.cell;
      const [dc, dr] = bowEl.classList.contains('h') ? [1, 0] : [0, 1];
      const col0 = letters.indexOf(bow[0]);
      const row0 = Number(bow.slice(1)) - 1;
      const ship = [];
      for (let i = 0; col0 + dc * i < 10 && row0 + dr * i < 10; i += 1) {
        ship.push(name(col0 + dc * i, row0 + dr * i));
        if (cls(ship[ship.length - 1]).contains('stern')) break;
      }
      for (let r = 0; r < 10; r += 1) {
        for (let c = 0; c < 10; c += 1) {
          if (c + dc * (ship.length - 1) > 9 || r + dr * (ship.length - 1) > 9) continue;
          const cells = ship.map((_, i) => name(c + dc * i, r + dr * i));
          if (cells[0] !== bow && cells.every((cell) => !taken.has(cell) || ship.includes(cell))) return { from: bow, bow: cells[0], length: ship.length };
        }
      }
    }
    return null;
  });
  assert.ok(plan, `a drafted ship has somewhere to go: ${await page.evaluate(() => [...document.querySelectorAll('[data-testid=own-board] .cell.ship')].map((el) => `${el.dataset.cell}:${el.className}`).join(' '))}`);
  const start = await centre(page, plan.from);
  const end = await centre(page, plan.bow);
  const client = await page.context().newCDPSession(page);
  await client.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [{ x: start.x, y: start.y }] });
  for (let step = 1; step <= 5; step += 1) {
    const x = start.x + ((end.x - start.x) * step) / 5;
    const y = start.y + ((end.y - start.y) * step) / 5;
    await client.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: [{ x, y }] });
  }
  await client.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  await client.detach();
  await page.waitForFunction((bow) => document.querySelector(`[data-testid=own-board] [data-cell="${bow}"]`).classList.contains('bow'), plan.bow, WAIT);
  return plan;
}

async function myTurn(page) {
  return page.locator('[data-testid=status].mine').count().then((n) => n > 0);
}

async function waitForTurn(pages) {
  const deadline = Date.now() + WAIT.timeout;
  while (Date.now() < deadline) {
    for (const player of pages) {
      if (await myTurn(player.page)) return player;
    }
    if (await pages[0].page.locator('[data-testid=result]').count()) return null;
    await pages[0].page.waitForTimeout(50);
  }
  for (const player of pages) {
    console.error(`${player.label}: ${player.page.url()} status: ${await player.page.locator('[data-testid=status]').textContent().catch(() => '?')}`);
  }
  throw new Error('nobody got the turn');
}

/** Fires at `cell` by mouse, or by keyboard (focus a neighbour, arrow onto it, Enter). */
async function fire(page, cell, { keyboard = false } = {}) {
  const button = target(page, cell);
  assert.equal(await button.getAttribute('aria-disabled'), 'false', `${cell} should be offered`);
  if (keyboard) {
    const column = cell.charCodeAt(0) - 65;
    const neighbour = `${String.fromCharCode(65 + (column === 0 ? 1 : column - 1))}${cell.slice(1)}`;
    await target(page, neighbour).focus();
    await page.keyboard.press(column === 0 ? 'ArrowLeft' : 'ArrowRight');
    assert.equal(await page.evaluate(() => document.activeElement.dataset.cell), cell);
    await page.keyboard.press('Enter');
  } else {
    await button.click();
  }
  await page.waitForFunction((name) => {
    const el = document.querySelector(`[data-testid=target-board] [data-cell="${name}"]`);
    return el && /\b(hit|miss|sunk)\b/.test(el.className);
  }, cell, WAIT);
}

/**
 * The next shot of a player who means to win: the untried cell covered by the most placements
 * of the ships still afloat (a placement through an open hit counts far more), keeping to what
 * the view proves — misses, marked cells, sunk ships and, where ships never touch
 * (`shipsMayTouch` false), the cells around a sunk ship, diagonal to a hit or beside a hit a
 * placement does not cover.
 */
function bestShot(view, { shipsMayTouch }) {
  const name = (column, row) => `${String.fromCharCode(65 + column)}${row + 1}`;
  const at = (cell) => [cell.charCodeAt(0) - 65, Number(cell.slice(1)) - 1];
  const inside = (column, row) => column >= 0 && column < 10 && row >= 0 && row < 10;
  const tried = new Set(view.shots.map((shot) => shot.cell));
  const sunkCells = new Set(view.sunk.flatMap((ship) => ship.cells));
  const openHits = new Set(view.shots.filter((shot) => shot.outcome !== 'miss' && !sunkCells.has(shot.cell)).map((shot) => shot.cell));
  const water = new Set([...view.shots.filter((shot) => shot.outcome === 'miss').map((shot) => shot.cell), ...view.marked]);
  for (const cell of shipsMayTouch ? [] : sunkCells) {
    const [column, row] = at(cell);
    for (const dc of [-1, 0, 1]) for (const dr of [-1, 0, 1]) if (inside(column + dc, row + dr)) water.add(name(column + dc, row + dr));
  }
  for (const cell of shipsMayTouch ? [] : openHits) {
    const [column, row] = at(cell);
    for (const dc of [-1, 1]) for (const dr of [-1, 1]) if (inside(column + dc, row + dr)) water.add(name(column + dc, row + dr));
  }
  const remaining = view.fleet.map((ship) => ship.length);
  for (const ship of view.sunk) remaining.splice(remaining.indexOf(ship.cells.length), 1);
  const score = new Map();
  for (const length of remaining) {
    for (const horizontal of [true, false]) {
      for (let column = 0; column < 10; column += 1) {
        for (let row = 0; row < 10; row += 1) {
          const cells = Array.from({ length }, (_, i) => (horizontal ? [column + i, row] : [column, row + i]));
          if (!cells.every(([c, r]) => inside(c, r))) continue;
          const names = cells.map(([c, r]) => name(c, r));
          if (names.some((cell) => water.has(cell) || sunkCells.has(cell))) continue;
          const through = names.filter((cell) => openHits.has(cell)).length;
          // Ships never touch: a placement beside an open hit it does not cover is impossible.
          const beside = !shipsMayTouch && cells.some(([c, r]) => [[-1, 0], [1, 0], [0, -1], [0, 1]].some(([dc, dr]) => {
            const next = name(c + dc, r + dr);
            return inside(c + dc, r + dr) && openHits.has(next) && !names.includes(next);
          }));
          if (beside) continue;
          const weight = 64 ** through;
          for (const cell of names) if (!tried.has(cell)) score.set(cell, (score.get(cell) || 0) + weight);
        }
      }
    }
  }
  let best = null;
  for (const [cell, value] of score) if (!best || value > best[1]) best = [cell, value];
  if (best) return best[0];
  for (let row = 0; row < 10; row += 1) for (let column = 0; column < 10; column += 1) if (!tried.has(name(column, row))) return name(column, row);
  return null;
}

/**
 * The end-of-game summary as the events say it, computed here on its own: per player the
 * shots, hits (a sinking shot is a hit), accuracy, longest run of hits, the time from the
 * turn coming to them (the battle's start or the shot before) to each shot, summed, and
 * the rating change (as rounded on the ladder), as the page prints them.
 */
function summaryFromEvents(events) {
  const started = events.find((event) => event.kind === 'battle_started');
  const players = [...new Set(events.filter((event) => event.kind === 'shot_fired').map((event) => event.player))];
  const figures = new Map();
  for (const player of players) {
    let shots = 0; let hits = 0; let run = 0; let streak = 0; let used = 0;
    let from = Date.parse(started.at);
    for (const event of events.filter((e) => e.kind === 'shot_fired')) {
      if (event.player === player) {
        shots += 1;
        used += Date.parse(event.at) - from;
        if (event.outcome === 'miss') run = 0; else { hits += 1; run += 1; streak = Math.max(streak, run); }
      }
      from = Date.parse(event.at);
    }
    const rated = events.find((event) => event.kind === 'rating_updated');
    const change = rated && rated.changes.find((entry) => entry.player === player);
    const delta = change ? Math.round(change.after.rating) - Math.round(change.before.rating) : null;
    const seconds = Math.round(used / 1000);
    figures.set(player, {
      shots: String(shots), hits: String(hits), accuracy: `${Math.round((100 * hits) / shots)} %`, streak: String(streak),
      time: `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`,
      rating: delta === null ? '—' : delta >= 0 ? `+${delta}` : `−${-delta}`,
    });
  }
  return figures;
}

async function main() {
  if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  try {
    const ala = await newPlayer(browser, 'Ala', { locale: 'en-GB' });
    const bolek = await newPlayer(browser, 'Bolek', { locale: 'pl-PL', viewport: { width: 390, height: 844 }, hasTouch: true });
    const watcher = await newPlayer(browser, 'Celina', { locale: 'en-GB' });
    if (SCREENSHOTS) await shoot(ala.page, 'signin');
    await audit(ala.page, 'sign-in', { log });

    log('register, and a refusal shown from the problem detail');
    const alaName = `Ala-${suffix}`;
    await register(ala.page, alaName);
    await bolek.page.fill('#register-name', alaName);
    await bolek.page.click('[data-testid=register] button[type=submit]');
    const refusal = bolek.page.locator('[data-testid=auth-error]');
    await refusal.filter({ hasText: /\w/ }).waitFor(WAIT);
    const refusalText = await refusal.textContent();
    assert.ok(!/^\{|urn:|problem|\b409\b/.test(refusalText), `refusal shown raw: ${refusalText}`);
    assert.equal(refusalText, 'Ta nazwa jest zajęta. Wybierz inną.', 'the refusal is told in the player’s language from its code');
    await register(bolek.page, `Bolek-${suffix}`);
    const celinaName = `Celina-${suffix}`;
    const celinaPassword = 'siedem-mórz-7';
    await register(watcher.page, celinaName, celinaPassword);
    assert.match(await bolek.page.textContent('#nav'), /Poczekalnia/, 'a Polish browser gets Polish text');
    await ala.page.waitForSelector('[data-testid=my-matches] .empty', WAIT);
    await audit(ala.page, 'lobby', { log });

    log('the lobby’s first load, everything compressed as sent: at most 100 KB');
    {
      const session = await ala.page.evaluate(() => localStorage.getItem('statki.session'));
      const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
      await context.addInitScript((kept) => { if (!localStorage.getItem('statki.session')) localStorage.setItem('statki.session', kept); }, session);
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('Network.enable');
      const sizes = new Map();
      const urls = new Map();
      cdp.on('Network.responseReceived', (event) => urls.set(event.requestId, event.response.url));
      cdp.on('Network.loadingFinished', (event) => sizes.set(event.requestId, event.encodedDataLength));
      await page.goto(`${BASE}/`);
      await page.waitForSelector('.lobby:not(.pending) [data-testid=my-matches] .empty', WAIT);
      await page.waitForTimeout(1000);
      const bytes = [...sizes.values()].reduce((sum, size) => sum + size, 0);
      const largest = [...sizes].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([request, size]) => `${(urls.get(request) || '?').replace(BASE, '')} ${(size / 1024).toFixed(1)} KB`);
      log(`lobby first load: ${(bytes / 1024).toFixed(1)} KB in ${sizes.size} answers (largest: ${largest.join(', ')})`);
      assert.ok(bytes <= 100 * 1024, `the lobby's first load is ${(bytes / 1024).toFixed(1)} KB, over 100 KB`);
      await context.close();
    }

    log('at 360 px every header control is on screen, in English and in Polish');
    {
      await ala.page.setViewportSize({ width: 360, height: 740 });
      const menuOpen = async () => (await ala.page.getAttribute('[data-testid=menu]', 'aria-expanded')) === 'true';
      for (const language of ['en', 'pl']) {
        await openMenu(ala.page);
        await ala.page.selectOption('header select.language', language);
        await ala.page.waitForFunction((code) => document.documentElement.lang === code, language, WAIT);
        // Folded: the brand, the three links and the Menu button.
        if (await menuOpen()) await ala.page.click('[data-testid=menu]');
        const folded = await headerBoxes(ala.page);
        const height = await ala.page.locator('header.top').evaluate((el) => Math.round(el.getBoundingClientRect().height));
        assert.equal(folded.length, 5, `folded: ${JSON.stringify(folded)}`);
        for (const [text, left, right] of folded) assert.ok(left >= 0 && right <= 360, `${language}: “${text}” on screen, folded: x ${left}…${right}`);
        // Opened: the account's controls too.
        await openMenu(ala.page);
        const boxes = await headerBoxes(ala.page);
        assert.ok(boxes.length >= 10, `the header's controls are found: ${JSON.stringify(boxes)}`);
        for (const [text, left, right] of boxes) assert.ok(left >= 0 && right <= 360, `${language}: “${text}” on screen at 360 px: x ${left}…${right}`);
        assert.deepEqual(await controlsOffScreen(ala.page), [], `${language}: every control of the lobby on screen`);
        log(`header at 360 px (${language}): folded ${height} px high (${folded.map(([text, left, right]) => `${text || '?'} ${left}…${right}`).join('; ')}); opened: ${boxes.map(([text, left, right, top]) => `${text || '?'} ${left}…${right}@${top}`).join('; ')}`);
      }
      await ala.page.selectOption('header select.language', 'en');
      if (await menuOpen()) await ala.page.click('[data-testid=menu]');
      await ala.page.setViewportSize({ width: 1280, height: 900 });
    }

    log('the theme switch overrides the system theme');
    await ala.page.selectOption('[data-testid=theme]', 'dark');
    assert.equal(await ala.page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    const darkPaper = await ala.page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    assert.equal(darkPaper, 'rgb(15, 26, 36)', 'the dark theme paints the page dark under a light system theme');
    await ala.page.emulateMedia({ colorScheme: 'dark' });
    await ala.page.selectOption('[data-testid=theme]', 'light');
    assert.equal(await ala.page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), 'rgb(244, 247, 250)', 'the light theme wins over a dark system theme');
    await ala.page.selectOption('[data-testid=theme]', 'auto');
    assert.equal(await ala.page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), 'rgb(15, 26, 36)', 'auto follows the system');
    await ala.page.emulateMedia({ colorScheme: 'light' });

    log('create and join a statki match');
    const id = await createMatch(ala.page, 'statki');
    await ala.page.waitForSelector('[data-testid=status]:has-text("Waiting")', WAIT);
    await joinFromLobby(bolek.page, id);
    await ala.page.waitForSelector('[data-testid=placed-count]', WAIT);

    log('presence: the opponent shown online, away while their page is closed, online again');
    {
      const theirPresence = ala.page.locator('[data-testid=players] .player-chip:not(.me) [data-testid=presence]');
      await ala.page.waitForSelector('[data-testid=players] .player-chip:not(.me) [data-testid=presence][data-presence=online]', WAIT);
      assert.match(await theirPresence.textContent(), /online/, 'the dot is labelled for screen readers');
      assert.equal(await ala.page.locator('[data-testid=players] .player-chip.me [data-testid=presence]').count(), 0, 'no dot beside your own name');
      const bolekMatch = bolek.page.url();
      await bolek.page.goto('about:blank');
      // The server notices a closed stream at once, or at its next keep-alive (15 s) at the latest.
      await ala.page.waitForSelector('[data-testid=players] .player-chip:not(.me) [data-testid=presence][data-presence=away]', { timeout: 25_000 });
      assert.match(await theirPresence.textContent(), /away/);
      await ala.page.waitForSelector('[data-testid=players] .player-chip:not(.me) [data-testid=away-note]:visible', WAIT);
      assert.equal(await ala.page.textContent('[data-testid=players] .player-chip:not(.me) [data-testid=away-note]'), 'away', 'away is written on the chip, not only a hollow dot');
      await ala.page.waitForSelector('[data-testid=announce]:has-text("has left the match page")', WAIT);
      await bolek.page.goto(bolekMatch);
      await ala.page.waitForSelector('[data-testid=players] .player-chip:not(.me) [data-testid=presence][data-presence=online]', WAIT);
      await ala.page.waitForSelector('[data-testid=announce]:has-text("is back")', WAIT);
      assert.equal(await ala.page.locator('[data-testid=players] .player-chip:not(.me) [data-testid=away-note]:visible').count(), 0);
      await bolek.page.waitForSelector('[data-testid=players] .player-chip:not(.me) [data-testid=presence][data-presence=online]', WAIT);
    }

    log('Bolek: a random layout shown first, re-rolled, a ship dragged by touch, then Ready');
    await bolek.page.waitForSelector('[data-testid=own-board] .cell.ship.draft', WAIT);
    assert.equal(await bolek.page.locator('[data-testid=own-board] .cell.ship').count(), 17, 'the whole random layout is shown');
    await bolek.page.click('[data-testid=by-hand]');
    await bolek.page.waitForSelector('[data-testid=rotate]', WAIT);
    assert.equal(await bolek.page.locator('[data-testid=rotate]').innerText(), 'Obróć: poziomo', 'the phone’s Rotate button names no key');
    assert.equal(await bolek.page.locator('[data-testid=rotate] .key-hint').isVisible(), false);
    await bolek.page.click('[data-testid=reroll]');
    await bolek.page.waitForSelector('[data-testid=own-board] .cell.ship.draft', WAIT);
    assert.equal(await bolek.page.locator('[data-testid=next-ship]').count(), 0, 'no “next ship” while the random layout is shown');
    assert.equal(await bolek.page.locator('[data-testid=ship-list] li[data-state=drafted]').count(), 5, 'every ship is listed where the layout has it');
    assert.match(await bolek.page.textContent('[data-testid=ship-list]'), /wylosowany/);
    assert.doesNotMatch(await bolek.page.textContent('[data-testid=ship-list]'), /nieustawiony/, 'no ship listed as not placed');
    assert.match(await bolek.page.textContent('[data-testid=status]'), /losowy układ/);
    assert.equal(await bolek.page.textContent('[data-testid=placed-count]'), 'Ustawione okręty: 5 z 5');
    assert.ok((await viewOf(bolek.page, id)).fleet.every((ship) => !ship.placement), 'nothing is sent before Ready');
    const layout = () => bolek.page.evaluate(() => [...document.querySelectorAll('[data-testid=own-board] .cell.ship')].map((el) => el.dataset.cell).join(','));
    const firstLayout = await layout();
    await bolek.page.click('[data-testid=reroll]');
    assert.notEqual(await layout(), firstLayout, 'Re-roll draws another layout');
    const moved = await touchDragShip(bolek.page);
    await placeAtRandom(bolek.page);
    const bolekPlaced = (await viewOf(bolek.page, id)).fleet;
    assert.ok(bolekPlaced.some((ship) => ship.placement.cell === moved.bow && ship.length === moved.length), `the ship dragged by touch to ${moved.bow} stands there`);
    await bolek.page.waitForFunction(() => document.querySelectorAll('[data-testid=own-board] .cell.ship').length === 17, null, WAIT);
    await ala.page.waitForSelector('[data-testid=opponent-state].ready', WAIT);

    log('Ala places by hand: hints, rotate (key and button), pick up and move, drag by mouse, random for the rest');
    await ala.page.click('[data-testid=by-hand]');
    await waitNextShip(ala.page, 'Carrier');
    assert.equal(await ala.page.locator('[data-testid=rotate]').textContent(), 'Rotate: horizontal (R)');
    assert.ok(await ala.page.locator('[data-testid=rotate] .key-hint').isVisible(), 'with a keyboard, the button names its key');
    assert.match(await own(ala.page, 'A1').getAttribute('class'), /hint/);
    assert.equal(await own(ala.page, 'G1').getAttribute('aria-disabled'), 'true', 'a carrier cannot start on G1 horizontally');
    assert.match(await own(ala.page, 'A1').getAttribute('aria-label'), /^A1, /);
    await ala.page.waitForFunction(() => /\d:\d\d/.test(document.querySelector('[data-testid=players] .player-chip.me .clock.running').textContent), null, WAIT);
    assert.equal(await ala.page.textContent('[data-testid=players] .player-chip:not(.me) .clock'), 'ready', 'the opponent who placed at random is off the placement clock');
    await own(ala.page, 'A1').click();
    await waitNextShip(ala.page, 'Battleship');
    const placing = await audit(ala.page, 'placement', { log });
    for (const what of ['own hull vs water', 'bow hint vs water', 'grid line vs page']) assert.ok(placing.has(`${what} (dark)`), `placement measured ${what}`);
    assert.equal(await own(ala.page, 'A1').getAttribute('class'), 'cell ship h bow', 'the carrier’s bow is drawn as a bow');
    assert.equal(await own(ala.page, 'E1').getAttribute('class'), 'cell ship h stern', 'and its stern as a stern');
    await ala.page.keyboard.press('r');
    await ala.page.waitForSelector('[data-testid=rotate]:has-text("vertical")', WAIT);
    assert.equal(await own(ala.page, 'J8').getAttribute('aria-disabled'), 'true', 'a vertical battleship cannot start on J8');
    await own(ala.page, 'J1').click();
    await waitNextShip(ala.page, 'Cruiser');
    if (SCREENSHOTS) {
      await own(ala.page, 'D6').hover();
      await ala.page.waitForSelector('[data-testid=own-board] .cell.preview', WAIT);
      await shoot(ala.page, 'placement');
    }
    await ala.page.click('[data-testid=rotate]');
    await ala.page.waitForSelector('[data-testid=rotate]:has-text("horizontal")', WAIT);
    await own(ala.page, 'C1').click(); // picks the carrier up again
    await waitNextShip(ala.page, 'Carrier');
    await own(ala.page, 'A3').click(); // and puts it down elsewhere
    await waitNextShip(ala.page, 'Cruiser');
    assert.doesNotMatch(await own(ala.page, 'A1').getAttribute('class'), /ship/);
    await own(ala.page, 'C6').click();
    await waitNextShip(ala.page, 'Submarine');
    // Dragged by the mouse from its middle: the cruiser moves from C6 to A5.
    await mouseDrag(ala.page, 'D6', 'B5');
    await ala.page.waitForFunction(() => document.querySelector('[data-testid=own-board] [data-cell=A5]').classList.contains('bow'), null, WAIT);
    assert.equal((await viewOf(ala.page, id)).fleet[2].placement.cell, 'A5', 'the dragged cruiser stands at A5');
    await own(ala.page, 'A7').click();
    await waitNextShip(ala.page, 'Destroyer');
    log('placement feedback: a refused cell is told; the last ship is held for a review, not locked');
    {
      // A horizontal destroyer from J10 would leave the sea.
      assert.equal(await own(ala.page, 'J10').getAttribute('aria-disabled'), 'true');
      await own(ala.page, 'J10').click({ force: true });
      await ala.page.waitForSelector('[data-testid=place-note]:has-text("cannot start at J10")', WAIT);
      assert.match(await own(ala.page, 'J10').getAttribute('class'), /\brefused\b/, 'the refused cell shakes');
      await own(ala.page, 'H10').click();
      await ala.page.waitForSelector('[data-testid=status]:has-text("check your fleet")', WAIT);
      assert.equal((await viewOf(ala.page, id)).fleet_locked, false, 'the last ship placed by hand does not lock the fleet');
      assert.equal(await ala.page.locator('[data-testid=ship-list] li[data-state=unplaced]').count(), 0);
      assert.equal(await ala.page.locator('[data-testid=ready]').count(), 1, 'Ready waits for the player');
      assert.equal(await ala.page.textContent('[data-testid=placed-count]'), '5 of 5 ships placed');
      await ala.page.click('[data-testid=ship-list] li[data-state=drafted] button');
      await waitNextShip(ala.page, 'Destroyer');
    }
    await ala.page.click('[data-testid=reroll]:has-text("Random for the rest")');
    await ala.page.waitForSelector('[data-testid=own-board] .cell.ship.draft', WAIT);
    assert.equal(await ala.page.locator('[data-testid=own-board] .cell.ship.draft').count(), 2, 'only the destroyer is drawn at random');
    await placeAtRandom(ala.page);
    await ala.page.waitForSelector('[data-testid=target-board]', { ...WAIT, state: 'visible' });
    const alaView = await viewOf(ala.page, id);
    log('ships drawn as ships: one deck per class, horizontal and vertical');
    {
      const arts = await ala.page.evaluate(() => [...document.querySelectorAll('[data-testid=own-board] .ship-art')].map((el) => `${el.dataset.kind}:${el.classList.contains('v') ? 'v' : 'h'}`));
      // The destroyer was drawn at random, either way.
      assert.deepEqual(arts.filter((art) => !art.startsWith('destroyer')).sort(), ['battleship:v', 'carrier:h', 'cruiser:h', 'submarine:h'], `one deck per ship: ${arts}`);
      assert.equal(arts.filter((art) => art.startsWith('destroyer')).length, 1);
    }
    assert.deepEqual(alaView.fleet.slice(0, 4).map((ship) => `${ship.placement.cell}${ship.placement.orientation[0]}`), ['A3h', 'J1v', 'A5h', 'A7h'], 'random for the rest kept the ships placed by hand');

    log('battle, watched by a spectator');
    // From the lobby's live list where the server lists live matches, else by the match's link.
    await watcher.page.goto(`${BASE}/#/?at=${Date.now()}`);
    const watch = watcher.page.locator(`[data-testid=live-matches] [data-match="${id}"] a.button`);
    try {
      await watch.waitFor({ timeout: 4000 });
      await watch.click();
    } catch {
      log('this server lists no live matches: the spectator follows the link');
      await watcher.page.goto(`${BASE}/#/m/${id}`);
    }
    await watcher.page.waitForSelector('[data-testid=target-board]', { ...WAIT, state: 'visible' });
    await watcher.page.waitForFunction(() => document.querySelectorAll('[data-testid=players] [data-testid=presence][data-presence=online]').length === 2, null, WAIT);
    const bolekView = await viewOf(bolek.page, id);
    const bolekShips = bolekView.fleet.flatMap((ship) => ship.cells);
    const alaShips = new Set(alaView.fleet.flatMap((ship) => ship.cells));
    const bolekTargets = [];
    for (let row = 10; row >= 1 && bolekTargets.length < 40; row -= 1) {
      for (const col of 'JIHGFEDCBA') if (!alaShips.has(`${col}${row}`)) bolekTargets.push(`${col}${row}`);
    }
    // Bolek's third shot hits the stern of Ala's carrier (A3…E3), so her sea shows an own hit.
    bolekTargets.splice(2, 0, 'E3');
    log('clocks per player: only the player on turn counts down; who fires first is said');
    {
      const opener = await waitForTurn([ala, bolek]);
      const other = opener === ala ? bolek : ala;
      await opener.page.waitForFunction(() => /^(You fire first \(drawn at random\)|Strzelasz pierwszy \(wylosowano\))\.$/.test(document.querySelector('[data-testid=first-shot]').textContent), null, WAIT);
      await other.page.waitForSelector('[data-testid=first-shot]:not([hidden])', WAIT);
      assert.match(await other.page.textContent('[data-testid=first-shot]'), other === bolek ? new RegExp(`Pierwszy strzela ${alaName} \\(wylosowano\\)`) : /fires first \(drawn at random\)/);
      const chipClock = (player, mine) => player.page.locator(`[data-testid=players] .player-chip${mine ? '.me' : ':not(.me)'} .clock`);
      assert.match(await chipClock(opener, true).getAttribute('class'), /\brunning\b/);
      assert.doesNotMatch(await chipClock(opener, true).getAttribute('class'), /urgent/, 'a fresh 30 s shot clock is not urgent');
      assert.match(await chipClock(opener, false).getAttribute('class'), /\bpaused\b/);
      assert.equal(await chipClock(opener, false).textContent(), '0:30', 'the waiting player shows a full shot allowance');
      assert.match(await chipClock(other, false).getAttribute('class'), /\brunning\b/);
      assert.match(await chipClock(other, true).getAttribute('class'), /\bpaused\b/);
      assert.match(await opener.page.textContent('[data-testid=status]'), /^Your shot|^Twój strzał/);
      const before = await chipClock(opener, true).textContent();
      await opener.page.waitForFunction((start) => document.querySelector('[data-testid=players] .player-chip.me .clock').textContent !== start, before, WAIT);
      assert.equal(await chipClock(opener, false).textContent(), '0:30', 'the waiting player’s clock does not move');
      assert.match(await other.page.locator('[data-testid=players] .player-chip.on-turn').textContent(), opener === ala ? new RegExp(alaName) : /Bolek/);
    }
    log('reactions: a player reacts, the opponent and the spectator see it');
    {
      assert.equal(await watcher.page.locator('[data-testid=reactions] button').count(), 0, 'a spectator has no reaction buttons');
      await ala.page.click('[data-testid=reactions] button[data-reaction=nice_shot]');
      // One reaction every 3 s: the buttons rest meanwhile instead of being refused.
      assert.equal(await ala.page.locator('[data-testid=reactions] button[data-reaction=thanks]').isDisabled(), true, 'the buttons rest after a reaction');
      await watcher.page.waitForSelector(`[data-testid=reaction-log] li:has-text("${alaName}: Nice shot")`, WAIT);
      await bolek.page.waitForSelector(`[data-testid=reaction-log] li:has-text("${alaName}: Dobry strzał")`, WAIT);
      await ala.page.waitForSelector(`[data-testid=reaction-log] li:has-text("${alaName}: Nice shot")`, WAIT);
      await bolek.page.click('[data-testid=reactions] button[data-reaction=good_luck]');
      await watcher.page.waitForSelector(`[data-testid=reaction-log] li:has-text("Bolek-${suffix}: Good luck")`, WAIT);
      await ala.page.waitForSelector('[data-testid=reactions] button[data-reaction=thanks]:not([disabled])', WAIT);
      const events = await viewOf(watcher.page, `${id}/events`);
      assert.deepEqual(events.filter((event) => event.kind === 'reaction').map((event) => event.reaction), ['nice_shot', 'good_luck'], 'stored as reaction events');
    }
    let alaShots = 0;
    let bolekShots = 0;
    let reloaded = false;
    let checkedNotOffered = false;
    for (;;) {
      const shooter = await waitForTurn([ala, bolek]);
      if (!shooter) break;
      if (shooter === ala) {
        if (alaShots > 0 && !checkedNotOffered) {
          const fired = bolekShips[0];
          assert.equal(await target(ala.page, fired).getAttribute('aria-disabled'), 'true', 'a fired cell is not offered again');
          checkedNotOffered = true;
        }
        const cell = bolekShips[alaShots];
        await fire(ala.page, cell, { keyboard: alaShots % 3 === 1 });
        alaShots += 1;
        if (alaShots === 1) {
          const landed = target(ala.page, cell);
          assert.match(await landed.getAttribute('class'), /\bfresh-(hit|sunk)\b/, 'a hit just landed plays its animation');
          assert.notEqual(await landed.evaluate((el) => getComputedStyle(el).animationName), 'none');
        }
        if (alaShots === 1) {
          // The open sea has a swell drawn on it (its colour, which contrasts are measured against, stays flat).
          assert.match(await target(ala.page, 'J10').evaluate((el) => getComputedStyle(el).backgroundImage), /^url\("data:image\/svg\+xml/, 'water reads as water');
        }
        if (alaShots === 5) {
          // Bolek's carrier (his first five cells) has just gone down: its deck sinks.
          const sinking = ala.page.locator('[data-testid=target-board] .ship-art.sinking');
          assert.equal(await sinking.getAttribute('data-kind'), 'carrier', 'the sunk carrier is drawn as a carrier');
          assert.equal(await sinking.evaluate((el) => getComputedStyle(el).animationName), 'sinking', 'and plays its sinking');
        }
        if (alaShots === 4 && SCREENSHOTS) await shoot(ala.page, 'battle');
        if (alaShots === 4) {
          const battle = await audit(ala.page, 'battle', { log });
          for (const what of ['hit cell vs water', 'hit ✕ vs hit cell', 'latest-shot ring vs its cell', 'own hit segment vs own hull', 'own hit rim vs water', 'own hit ✕ vs hull', 'ship deck (me) vs hull']) {
            for (const scheme of ['light', 'dark']) assert.ok(battle.has(`${what} (${scheme})`), `battle measured ${what} (${scheme})`);
          }
          await audit(watcher.page, 'spectator', { log });
        }

        if (alaShots === bolekShips.length) break;
      } else {
        if (bolekShots === 0) await bolek.page.emulateMedia({ reducedMotion: 'reduce' });
        await fire(bolek.page, bolekTargets[bolekShots], { keyboard: bolekShots % 2 === 0 });
        bolekShots += 1;
        if (bolekShots === 1) {
          const splash = target(bolek.page, bolekTargets[0]);
          assert.match(await splash.getAttribute('class'), /\bfresh-miss\b/);
          assert.equal(await splash.evaluate((el) => getComputedStyle(el, '::after').animationName), 'none', 'no animation under prefers-reduced-motion');
          await bolek.page.emulateMedia({ reducedMotion: 'no-preference' });
          assert.equal(await splash.evaluate((el) => getComputedStyle(el, '::after').animationName), 'splash', 'the splash plays otherwise');
        }
        if (bolekShots === 3 && !reloaded) {
          log('reload mid-battle');
          await bolek.page.reload();
          await bolek.page.waitForSelector('[data-testid=target-board]', { ...WAIT, state: 'visible' });
          await bolek.page.waitForFunction(() => document.querySelectorAll('[data-testid=target-board] .cell:is(.miss, .hit)').length === 3, null, WAIT);
          reloaded = true;
        }
      }
    }
    assert.ok(reloaded, 'the reload happened');
    log('shot logs per side, never overwritten; spectator seas in the title order');
    await ala.page.waitForFunction((count) => document.querySelectorAll('[data-testid=shot-log-mine] li').length === count, alaShots, WAIT);
    await ala.page.waitForFunction((count) => document.querySelectorAll('[data-testid=shot-log-incoming] li').length === count, bolekShots, WAIT);
    await bolek.page.waitForFunction((count) => document.querySelectorAll('[data-testid=shot-log-mine] li').length === count, bolekShots, WAIT);
    await watcher.page.waitForFunction((count) => document.querySelectorAll('[data-testid=shot-log-0] li').length === count, alaShots, WAIT);
    assert.match(await ala.page.locator('[data-testid=shot-log-mine] li').last().textContent(), new RegExp(`^1\\.${bolekShips[0]}(hit|sunk)$`), 'the first shot is still in the log');
    assert.match(await watcher.page.locator('.sea').first().locator('.sea-caption').textContent(), new RegExp(alaName), 'the spectator’s first sea is the first player’s');
    assert.doesNotMatch(await watcher.page.textContent('.legend'), /your/i, 'the spectator’s key has no “your”');

    log('the end: result, both fleets, commitments verified in the browser');
    await ala.page.waitForSelector('[data-testid=result]', WAIT);
    assert.match(await ala.page.textContent('[data-testid=result]'), /You won/);
    await bolek.page.waitForSelector('[data-testid=result]', WAIT);
    assert.match(await bolek.page.textContent('[data-testid=result]'), /Przegrałeś/);
    await watcher.page.waitForSelector(`[data-testid=result]:has-text("${alaName} won")`, WAIT);
    assert.equal(await watcher.page.locator('.board .cell.sunk').count(), 17, 'the spectator followed every sinking shot');
    for (const player of [ala, bolek, watcher]) {
      await player.page.waitForFunction(() => document.querySelectorAll('[data-testid=commitment].ok').length === 2, null, WAIT);
    }
    // Bolek's fleet was revealed to nobody before; now Ala's sea shows where Bolek's ships... all sunk; Bolek sees Ala's unfound ships.
    assert.ok(await bolek.page.locator('[data-testid=target-board] .cell.revealed').count() > 0, 'the loser sees the winner’s fleet opened');
    log('the end-of-game summary: each figure recomputed here from the match’s events');
    {
      const events = await viewOf(ala.page, `${id}/events`);
      const expected = summaryFromEvents(events);
      for (const player of [ala, bolek, watcher]) {
        await player.page.waitForSelector('[data-testid=summary] td[data-stat=shots]', WAIT);
        const shown = await player.page.evaluate(() => Object.fromEntries([...document.querySelectorAll('[data-testid=summary] td')].map((td) => [`${td.dataset.player}|${td.dataset.stat}`, td.textContent])));
        for (const [who, figures] of expected) {
          for (const [stat, text] of Object.entries(figures)) {
            assert.equal(shown[`${who}|${stat}`], text, `${player.label} sees ${stat} of ${who} as the events say`);
          }
        }
        // The summary comes first, the fleet commitments folded away after it.
        assert.equal(await player.page.locator('[data-testid=commitments]').evaluate((el) => el.tagName === 'DETAILS' && !el.open), true, 'the commitments are folded away');
        assert.ok(await player.page.locator('[data-testid=summary]').evaluate((el) => Boolean(el.compareDocumentPosition(document.querySelector('[data-testid=commitments]')) & Node.DOCUMENT_POSITION_FOLLOWING)), 'the summary comes before the commitments');
      }
      const alaFigures = expected.get(alaView.you);
      assert.equal(alaFigures.shots, String(alaShots));
      assert.equal(alaFigures.hits, '17', 'every shot of Ala’s found a ship');
      assert.equal(alaFigures.accuracy, `${Math.round(1700 / alaShots)} %`);
      assert.equal(expected.get(bolekView.you).hits, '1', 'Bolek hit the carrier once');
      log(`summary checked against ${events.length} events: ${[...expected].map(([who, figures]) => `${who.slice(0, 8)} ${JSON.stringify(figures)}`).join('; ')}`);
    }
    if (SCREENSHOTS) await shoot(ala.page, 'end');
    await audit(ala.page, 'end (winner)', { log });
    const loserEnd = await audit(bolek.page, 'end (loser)', { log });
    for (const what of ['sunk own hull vs water', 'own sunk ✕ vs hull', 'miss mark vs water']) assert.ok(loserEnd.has(`${what} (light)`), `end measured ${what}`);

    log('replay event by event');
    await ala.page.click('[data-testid=replay-link]');
    await ala.page.waitForSelector('[data-testid=replay-position]', WAIT);
    await ala.page.waitForFunction(() => /(\d+) of \1/.test((document.querySelector('[data-testid=replay-position]')?.textContent || '')), null, WAIT);
    const last = await ala.page.textContent('[data-testid=replay-event]');
    assert.match(last, /won|Ratings/);
    await ala.page.click('[data-testid=replay-prev]');
    const before = await ala.page.textContent('[data-testid=replay-event]');
    assert.notEqual(before, last);
    await ala.page.click('[data-testid=replay-next]');
    assert.equal(await ala.page.textContent('[data-testid=replay-event]'), last);
    await ala.page.locator('[aria-label="First event"]').click();
    assert.equal(await ala.page.locator('[data-testid=replay-board-0] .cell.ship').count(), 0);
    let steps = 0;
    // Bolek's random fleet may put his carrier at A1 too: look for Ala's.
    const alaCarrier = new RegExp(`^${alaName} placed the Carrier at A1,`);
    while (!alaCarrier.test(await ala.page.textContent('[data-testid=replay-event]'))) {
      assert.ok(steps < 20, 'the replay shows Ala placing her carrier at A1 first');
      await ala.page.click('[data-testid=replay-next]');
      steps += 1;
    }
    assert.match(await ala.page.textContent('[data-testid=replay-event]'), new RegExp(`^${alaName} placed`));
    assert.ok(await ala.page.locator('[data-testid=replay-board-0] .cell.ship').count() === 5, 'the carrier stands on the replayed sea');
    const reactionStep = `${alaName}: “Nice shot”.`;
    for (let more = 0; (await ala.page.textContent('[data-testid=replay-event]')) !== reactionStep; more += 1) {
      assert.ok(more < 60, 'the replay tells Ala’s reaction');
      await ala.page.click('[data-testid=replay-next]');
    }
    if (SCREENSHOTS) await shoot(ala.page, 'replay');
    await audit(ala.page, 'replay', { log });

    log('rematch');
    await ala.page.goto(`${BASE}/#/m/${id}`);
    await ala.page.click('[data-testid=rematch]');
    await bolek.page.waitForSelector('[data-testid=rematch]:has-text("rewanż")', WAIT);
    await bolek.page.waitForFunction(() => document.querySelector('[data-testid=rematch]').textContent.includes('Przyjmij'), null, WAIT);
    await bolek.page.click('[data-testid=rematch]');
    await bolek.page.waitForURL((url) => url.hash.startsWith('#/m/') && !url.hash.includes(id), WAIT);
    await ala.page.waitForURL((url) => url.hash.startsWith('#/m/') && !url.hash.includes(id), WAIT);
    assert.equal(matchIdOf(ala.page), matchIdOf(bolek.page));
    await ala.page.waitForSelector('[data-testid=placed-count]', WAIT);
    await ala.page.click('[data-testid=resign] , .resign button');
    await ala.page.click('.resign button.danger');
    await ala.page.waitForSelector('[data-testid=result]:has-text("You lost")', WAIT);

    log('classic: the marked ring and the extra shot');
    const classic = await createMatch(ala.page, 'classic');
    await joinFromLobby(bolek.page, classic);
    await ala.page.waitForSelector('[data-testid=ready]', WAIT);
    log('classic placed by hand: ships of one class are counted');
    await ala.page.click('[data-testid=by-hand]');
    await waitNextShip(ala.page, 'Battleship');
    assert.equal(await ala.page.locator('[data-testid=ship-count]').count(), 0, 'a single battleship has no counter');
    await own(ala.page, 'A1').click();
    await waitNextShip(ala.page, 'Cruiser');
    assert.equal(await ala.page.textContent('[data-testid=ship-count]'), ' — 1 of 2');
    await own(ala.page, 'A3').click();
    await ala.page.waitForSelector('[data-testid=ship-count]:has-text("2 of 2")', WAIT);
    await own(ala.page, 'A5').click();
    await ala.page.waitForSelector('[data-testid=ship-count]:has-text("1 of 3")', WAIT);
    assert.match(await ala.page.textContent('[data-testid=next-ship]'), /^Next: Destroyer \(2 cells\) — 1 of 3$/);
    await ala.page.click('[data-testid=reroll]');
    await placeAtRandom(ala.page);
    await placeAtRandom(bolek.page);
    const first = await waitForTurn([ala, bolek]);
    const second = first === ala ? bolek : ala;
    const victim = await viewOf(second.page, classic);
    const boat = victim.fleet.find((ship) => ship.length === 1).cells[0];
    await first.page.waitForSelector('[data-testid=extra-rule]', WAIT);
    await fire(first.page, boat);
    await first.page.waitForSelector('[data-testid=status].mine.extra', WAIT);
    const marked = first.page.locator('[data-testid=target-board] .cell.marked');
    await marked.first().waitFor(WAIT);
    assert.ok(await marked.count() >= 3, 'the ring around the sunk boat is marked');
    for (const cell of await marked.evaluateAll((els) => els.map((el) => el.dataset.cell))) {
      assert.equal(await target(first.page, cell).getAttribute('aria-disabled'), 'true', `marked ${cell} is not offered`);
    }
    if (SCREENSHOTS) await shoot(first.page, 'classic-extra-shot');
    const ring = await audit(first.page, 'classic marked ring', { log });
    assert.ok(ring.has('known-empty mark vs water (dark)'), 'the marked ring was measured');
    await first.page.click('.resign button');
    await first.page.click('.resign button.danger');
    await first.page.waitForSelector('[data-testid=result]', WAIT);

    log('battaglia: a sunk ship is named');
    const italian = await createMatch(ala.page, 'battaglia');
    await joinFromLobby(bolek.page, italian);
    await ala.page.waitForSelector('[data-testid=ready]', WAIT);
    await placeAtRandom(ala.page);
    await placeAtRandom(bolek.page);
    const opener = await waitForTurn([ala, bolek]);
    const defender = opener === ala ? bolek : ala;
    const boatCell = (await viewOf(defender.page, italian)).fleet.find((ship) => ship.length === 1).cells[0];
    await fire(opener.page, boatCell);
    assert.match(await target(opener.page, boatCell).getAttribute('aria-label'), new RegExp(`^${boatCell}, .*Motovedetta`));
    await opener.page.waitForSelector('[data-testid=announce]:has-text("Motovedetta")', WAIT);
    assert.match(await opener.page.textContent('[data-testid=announce]'), /Motovedetta \((patrol boat|kuter patrolowy)\)/, 'the Italian ship name is glossed');
    await opener.page.click('.resign button');
    await opener.page.click('.resign button.danger');
    await opener.page.waitForSelector('[data-testid=result]', WAIT);

    log('never miss your turn: sound on (a WebAudio cue), notifications asked for, a 6 s shot clock, the player on turn on another page');
    for (const player of [ala, bolek]) {
      await openMenu(player.page);
      assert.equal(await player.page.getAttribute('[data-testid=sound]', 'aria-pressed'), 'false', 'sound is off by default');
      await player.page.click('[data-testid=sound]');
      await player.page.waitForSelector('[data-testid=sound][aria-pressed=true]', WAIT);
      assert.ok(await player.page.evaluate(() => window.statkiTones) > 0, `${player.label}: switching sound on plays a synthesised cue`);
    }
    await ala.context.grantPermissions(['notifications']);
    await ala.page.click('[data-testid=notify]');
    await ala.page.waitForSelector('[data-testid=notify][aria-pressed=true]', WAIT);
    await ala.page.goto(BASE + '/#/');
    await ala.page.waitForSelector('[data-testid=create-match]', WAIT);
    await ala.page.check('#create-clock');
    await ala.page.fill('#create-placement', '60');
    await ala.page.fill('#create-shot', '10');
    await ala.page.click('[data-testid=create-match] button[type=submit]');
    await ala.page.waitForURL(/#\/m\//, WAIT);
    const quick = matchIdOf(ala.page);
    await bolek.page.goto(`${BASE}/#/?at=${Date.now()}`);
    const quickRow = bolek.page.locator(`[data-testid=open-matches] [data-match="${quick}"]`);
    await quickRow.waitFor(WAIT);
    assert.match(await quickRow.locator('[data-testid=clock-badge]').textContent(), /ustawianie 60 s · strzał 10 s/, 'the joining player sees the custom clock');
    assert.equal(await quickRow.locator('[data-testid=clock-badge] .icon-clock').count(), 1, 'the clock badge draws its own icon');
    assert.doesNotMatch(await quickRow.locator('[data-testid=clock-badge]').textContent(), /⏱/, 'no emoji that needs a font');
    {
      // A 429 is told with its wait, from Retry-After (or RateLimit's t=), in the page's language.
      const told = await bolek.page.evaluate(async () => {
        const { Api } = await import('/app/js/api.js');
        const api = new Api();
        const problem = JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status: 429, code: 'rate_limited', detail: 'slow down' });
        const texts = [];
        for (const headers of [{ 'retry-after': '7' }, { ratelimit: '"address";r=0;t=12' }]) {
          try { await api.answer(new Response(problem, { status: 429, headers: { 'content-type': 'application/problem+json', ...headers } })); } catch (error) { texts.push(error.message); }
        }
        return texts;
      });
      assert.deepEqual(told, ['Za dużo żądań. Spróbuj ponownie za 7 s.', 'Za dużo żądań. Spróbuj ponownie za 12 s.'], 'the rate-limit refusal says how long to wait');
    }
    await bolek.page.goto(`${BASE}/#/m/${quick}`);
    const joinClock = bolek.page.locator('.match-title [data-testid=clock-badge]');
    await joinClock.waitFor(WAIT);
    assert.match(await joinClock.textContent(), /ustawianie 60 s · strzał 10 s/, 'the join screen shows the custom clock too');
    await bolek.page.locator('[data-testid=controls] .buttons button').first().click();
    await bolek.page.waitForSelector('[data-testid=ready]', WAIT);
    await ala.page.waitForSelector('[data-testid=ready]', WAIT);
    await placeAtRandom(ala.page);
    await placeAtRandom(bolek.page);
    log('time running out: the clock turns urgent at 5 s left, with a cue for the player whose clock it is');
    const present = await waitForTurn([ala, bolek]);
    const away = present === ala ? bolek : ala;
    // The other player leaves for another page before the turn comes to them.
    // The same document (only the hash changes), so the count of tones carries on.
    const turnMark = await cueMark(away.page);
    await away.page.goto(`${BASE}/#/ladder/statki`);
    {
      const mine = present.page.locator('[data-testid=players] .player-chip.me .clock');
      const urgentMark = await cueMark(present.page);
      const fresh = await mine.evaluate((el) => [el.textContent, el.className]);
      assert.doesNotMatch(fresh[1], /urgent/, `a fresh 10 s clock is not urgent: ${fresh}`);
      await present.page.waitForSelector('[data-testid=players] .player-chip.me .clock.urgent', WAIT);
      const atUrgent = await mine.textContent();
      assert.ok(['0:05', '0:04'].includes(atUrgent), `urgent from 5 s left, at ${atUrgent}`);
      const urgentCue = await heard(present.page, 'urgent', urgentMark, 'the player whose clock runs out');
      log(`cue: ${JSON.stringify(urgentCue)} on ${present.label}'s page at ${atUrgent}`);
      // From now on the page notes what the opponent's clock said when it first turned urgent.
      await present.page.evaluate(() => {
        window.statkiUrgentAt = null;
        const bar = document.querySelector('[data-testid=players]');
        new MutationObserver(() => {
          const clock = bar.querySelector('.player-chip:not(.me) .clock');
          if (window.statkiUrgentAt === null && clock && clock.classList.contains('urgent')) window.statkiUrgentAt = clock.textContent;
        }).observe(bar, { subtree: true, childList: true, attributes: true, characterData: true });
      });
      const cells = await present.page.evaluate(() => [...document.querySelectorAll('[data-testid=target-board] .cell[aria-disabled=false]')].map((el) => el.dataset.cell));
      await fire(present.page, cells[0]);
    }
    const turnToast = away.page.locator('.toast.turn');
    await turnToast.waitFor(WAIT);
    log(`cue: ${JSON.stringify(await heard(away.page, 'turn', turnMark, 'the player whose turn came on another page'))} on ${away.label}'s page with the toast`);
    assert.match(await turnToast.textContent(), /Your shot against|Twój strzał w meczu z/);
    assert.match(await away.page.title(), /^▶ /, 'the tab title says it is your turn');
    assert.match(await away.page.getAttribute('link[rel=icon]', 'href'), /^data:image\/svg\+xml/, 'the favicon carries a badge');
    await away.page.goto(`${BASE}/#/?at=${Date.now()}`);
    await away.page.waitForSelector(`[data-testid=my-matches] [data-match="${quick}"] [data-testid=your-turn]`, WAIT);
    assert.match(await away.page.textContent(`[data-testid=my-matches] [data-match="${quick}"]`), /(battle · 0:\d\d left|bitwa · zostało 0:\d\d)/, 'a live match in the list shows its clock running');
    // The present player sees the opponent's clock run and turn urgent in its last 5 s; never their own.
    const theirClock = present.page.locator('[data-testid=players] .player-chip:not(.me) .clock');
    await theirClock.and(present.page.locator('.running')).waitFor(WAIT);
    await present.page.waitForSelector('[data-testid=players] .player-chip:not(.me) .clock.urgent', WAIT);
    const theirsAtUrgent = await present.page.evaluate(() => window.statkiUrgentAt);
    assert.ok(['0:05', '0:04'].includes(theirsAtUrgent), `the opponent’s clock turns urgent at 5 s left, not before (at ${theirsAtUrgent})`);
    assert.doesNotMatch(await present.page.getAttribute('[data-testid=players] .player-chip.me .clock', 'class'), /urgent/, 'the waiting player’s own clock is never urgent');
    // Looked for from now on: the away page's toast and the present page's result come together.
    // This match's toast: another result may be told too (the battaglia match above, when its
    // winner left its page before the resignation reached it).
    const awayResult = away.page.locator('[data-testid=away-result]', { hasText: /You lost|Przegrałeś/ });
    const awayResultShown = awayResult.waitFor({ timeout: 30_000 }).then(async () => ({ text: await awayResult.textContent() }), (error) => ({ error }));
    const endMark = await cueMark(present.page);
    await present.page.waitForSelector('[data-testid=result]', { timeout: 20_000 });
    assert.match(await present.page.textContent('[data-testid=result]'), /You won|Wygrałeś/);
    log(`cue: ${JSON.stringify(await heard(present.page, 'won', endMark, 'the winner on the match page'))} on ${present.label}'s page`);
    log('the result reached while away is shown on return, and the list is up to date');
    // It once went missing whenever the match's creator was the one away: the watcher took
    // the match, seen waiting on its own page, for one already ended.
    const { text: awayText, error: awayError } = await awayResultShown;
    if (awayError) {
      throw new Error(`no away-result toast (${awayError.message}): away page ${away.page.url()}, kept ${await away.page.evaluate(() => JSON.stringify(Object.entries(localStorage).filter(([key]) => key.startsWith('statki.watch'))))}`);
    }
    assert.match(awayText, /You lost|Przegrałeś/);
    await away.page.waitForFunction((id) => {
      const row = document.querySelector(`[data-testid=my-matches] [data-match="${id}"]`);
      return row && /(lost|przegrana)/.test(row.textContent) && !row.querySelector('[data-testid=your-turn]');
    }, quick, WAIT).catch(async (error) => {
      throw new Error(`${error.message}; the row says: ${await away.page.locator(`[data-testid=my-matches] [data-match="${quick}"]`).textContent().catch(() => 'no row')}; url ${away.page.url()}`);
    });
    await awayResult.locator('.close').click();
    log('old notices are not toasted again after a reload');
    await away.page.reload();
    await away.page.waitForSelector('[data-testid=my-matches] .row', WAIT);
    await away.page.waitForTimeout(POLL_SETTLE_MS);
    assert.equal(await away.page.locator('.toast').count(), 0, `no toast after a reload: ${await away.page.locator('.toast').allTextContents()}`);
    assert.equal(await away.page.getAttribute('[data-testid=sound]', 'aria-pressed'), 'true', 'the sound stays on after a reload (remembered; off by default)');
    assert.equal(await away.page.title(), 'Statki');

    log('lobby: an open match with a house option, and the ranked queue pairing two players');
    await bolek.page.goto(`${BASE}/#/`);
    await bolek.page.waitForSelector('[data-testid=create-match]', WAIT);
    await bolek.page.selectOption('#create-ruleset', 'battaglia');
    await bolek.page.check('#create-extra');
    await bolek.page.click('[data-testid=create-match] button[type=submit]');
    await bolek.page.waitForURL(/#\/m\//, WAIT);
    const battaglia = matchIdOf(bolek.page);
    await ala.page.goto(`${BASE}/#/?at=${Date.now()}`);
    const openRow = ala.page.locator(`[data-testid=open-matches] [data-match="${battaglia}"]`);
    await openRow.waitFor(WAIT);
    assert.match(await openRow.textContent(), /Hit = shoot again/);
    await ala.page.selectOption('#queue-ruleset', 'statki');
    await ala.page.click('[data-testid=queue] button[type=submit]');
    await ala.page.waitForSelector('[data-testid=searching]', WAIT);
    assert.match(await ala.page.textContent('[data-testid=queue-rating]'), new RegExp(`^${alaName} \\(\\d+\\)$`), 'the queue row shows your name and rating');
    await ala.page.waitForSelector('[data-testid=my-matches] .row', WAIT);
    if (SCREENSHOTS) await shoot(ala.page, 'lobby');
    await bolek.page.click('[data-testid=withdraw]');
    await bolek.page.waitForSelector('[data-testid=result]', WAIT);
    await bolek.page.goto(`${BASE}/#/?at=${Date.now()}`);
    await bolek.page.waitForSelector('#queue-ruleset', WAIT);
    await bolek.page.selectOption('#queue-ruleset', 'statki');
    await bolek.page.click('[data-testid=queue] button[type=submit]');
    await bolek.page.waitForURL(/#\/m\//, WAIT);
    await ala.page.waitForURL(/#\/m\//, WAIT);
    assert.equal(matchIdOf(ala.page), matchIdOf(bolek.page), 'the queue paired the two players');
    await ala.page.waitForSelector('.badge.ranked', WAIT);
    await ala.page.waitForSelector('[data-testid=placed-count]', WAIT);
    await bolek.page.waitForSelector('[data-testid=placed-count]', WAIT);
    const lossMark = await cueMark(ala.page);
    const winMark = await cueMark(bolek.page);
    await ala.page.click('.resign button');
    await ala.page.click('.resign button.danger');
    await ala.page.waitForSelector('[data-testid=result]', WAIT);
    log(`cues at the end: ${JSON.stringify(await heard(ala.page, 'lost', lossMark, 'the loser on the match page'))} for ${ala.label}, ${JSON.stringify(await heard(bolek.page, 'won', winMark, 'the winner on the match page'))} for ${bolek.label}`);
    assert.ok(!(await ala.page.evaluate((from) => window.statkiCues.slice(from).some((c) => c.cue === 'won'), lossMark)), 'the loser hears no win');
    log('the rating and its change after a ranked game, ratings beside names');
    await ala.page.waitForSelector('[data-testid=rating-change]', WAIT);
    assert.match(await ala.page.textContent('[data-testid=rating-change]'), /^Your rating on the Statki ladder: \d+ → \d+ \(−\d+\)$/);
    await bolek.page.waitForSelector('[data-testid=rating-change]', WAIT);
    assert.match(await bolek.page.textContent('[data-testid=rating-change]'), /\(\+\d+\)$/);
    const alaAfter = /→ (\d+)/.exec(await ala.page.textContent('[data-testid=rating-change]'))[1];
    const bolekAfter = /→ (\d+)/.exec(await bolek.page.textContent('[data-testid=rating-change]'))[1];
    await ala.page.waitForFunction((rating) => document.querySelector('[data-testid=players] .player-chip.me [data-testid=rating]').textContent === rating, alaAfter, WAIT);
    {
      // The summary's rating change, both players, as the match's rating_updated event says.
      const rated = (await viewOf(ala.page, `${matchIdOf(ala.page)}/events`)).find((event) => event.kind === 'rating_updated');
      for (const change of rated.changes) {
        const delta = Math.round(change.after.rating) - Math.round(change.before.rating);
        const cell = `[data-testid=summary] td[data-stat=rating][data-player="${change.player}"]`;
        await ala.page.waitForSelector(cell, WAIT);
        assert.equal(await ala.page.textContent(cell), delta >= 0 ? `+${delta}` : `−${-delta}`, 'the summary’s rating change is the event’s');
      }
      log(`ranked summary: rating changes ${rated.changes.map((change) => (Math.round(change.after.rating) - Math.round(change.before.rating))).join(', ')} as rating_updated says`);
    }

    log('ladder and profile');
    await bolek.page.goto(`${BASE}/#/ladder/statki`);
    const ladderRow = bolek.page.locator(`[data-testid=ladder] tr:has-text("${alaName}")`);
    await ladderRow.waitFor(WAIT);
    await audit(bolek.page, 'ladder', { log });

    log('a challenge from the ladder arrives live');
    await ladderRow.locator('a.button').click();
    await bolek.page.waitForSelector('[data-testid=create-match]', WAIT);
    await bolek.page.click('[data-testid=create-match] button[type=submit]');
    await bolek.page.waitForURL(/#\/m\//, WAIT);
    const challenge = matchIdOf(bolek.page);
    const toast = ala.page.locator('.toast', { hasText: 'challenges you' });
    await toast.waitFor(WAIT);
    assert.match(await toast.textContent(), /challenges you \(Statki\)\./, 'the toast names the rules as the page does, not by their id');
    await toast.locator('button.link').click();
    await ala.page.waitForURL(new RegExp(`#/m/${challenge}`), WAIT);
    await ala.page.click('[data-testid=controls] button:has-text("Join")');
    await ala.page.waitForSelector('[data-testid=placed-count]', WAIT);
    await bolek.page.waitForSelector('[data-testid=placed-count]', WAIT);
    await bolek.page.click('.resign button');
    await bolek.page.click('.resign button.danger');
    await ala.page.waitForSelector('[data-testid=result]:has-text("You won")', WAIT);

    log('a challenge declined: the challenger is told');
    await bolek.page.goto(`${BASE}/#/?opponent=${alaView.you}`);
    await bolek.page.waitForSelector('[data-testid=create-match]', WAIT);
    await bolek.page.click('[data-testid=create-match] button[type=submit]');
    await bolek.page.waitForURL(/#\/m\//, WAIT);
    const refused = matchIdOf(bolek.page);
    await ala.page.goto(`${BASE}/#/?at=${Date.now()}`);
    const challengeRow = ala.page.locator(`[data-testid=open-matches] [data-match="${refused}"] [data-testid=row-rating]`);
    await challengeRow.waitFor(WAIT);
    log('leftover states: the queue box forgets a pairing whose match has ended');
    await ala.page.waitForSelector('[data-testid=queue] form', WAIT);
    assert.doesNotMatch(await ala.page.textContent('[data-testid=queue]'), /paired/, 'no “You have been paired” after that match ended');
    assert.equal(await challengeRow.textContent(), ` (${bolekAfter})`, 'the lobby row shows the challenger’s rating beside the name');
    await ala.page.goto(`${BASE}/#/m/${refused}`);
    await ala.page.click('[data-testid=decline]');
    await ala.page.waitForSelector('[data-testid=result]:has-text("The challenge was declined.")', WAIT);
    await bolek.page.locator('.toast', { hasText: 'odrzuca Twoje wyzwanie' }).waitFor(WAIT);
    await bolek.page.waitForSelector('[data-testid=result]:has-text("Wyzwanie zostało odrzucone.")', WAIT);
    {
      const title = await bolek.page.textContent('.match-title h1');
      assert.match(title, new RegExp(`vs ${alaName}$`), `the declined challenge names who was challenged: ${title}`);
      assert.equal(await bolek.page.locator('.sea:visible').count(), 0, 'no empty seas under a challenge that was declined');
      assert.equal(await bolek.page.locator('[data-testid=sunk-count]:visible').count(), 0);
    }
    await ala.page.goto(`${BASE}/#/p/${alaView.you}`);
    await ala.page.waitForSelector('.history tbody tr', WAIT);
    await audit(ala.page, 'profile', { log });

    log('log out');
    await ala.page.click('[data-testid=logout]');
    await ala.page.waitForSelector('#register-name', WAIT);
    await ala.page.reload();
    await ala.page.waitForSelector('#register-name', WAIT);

    log('bots, where the server has them');
    await bolek.page.goto(`${BASE}/#/?at=${Date.now()}`);
    await bolek.page.waitForSelector('[data-testid=create-match]', WAIT);
    const botRow = bolek.page.locator('[data-testid=bots] .row').first();
    try {
      await botRow.waitFor({ timeout: 3000 });
    } catch {
      log('this server has no bots: skipped');
    }
    const hasBots = (await botRow.count()) > 0;
    if (hasBots) {
      assert.match(await botRow.locator('[data-testid=bot-description]').textContent(), /^(Strzela|Poluje)/, 'the bot is described in Polish');
      await botRow.locator('button').click();
      await bolek.page.waitForURL(/#\/m\//, WAIT);
      await bolek.page.waitForSelector('[data-testid=ready]', WAIT);
      await placeAtRandom(bolek.page);
      await bolek.page.waitForSelector('[data-testid=target-board]', { ...WAIT, state: 'visible' });
      const botSeat = await waitForTurn([bolek]);
      assert.equal(botSeat, bolek);
      const shotsBefore = (await viewOf(bolek.page, matchIdOf(bolek.page))).incoming.length;
      await fire(bolek.page, 'E5');
      // Whatever E5 found, the bot answers on its turn and the turn comes back.
      await bolek.page.waitForFunction((before) => document.querySelectorAll('[data-testid=own-board] .cell.miss, [data-testid=own-board] .cell.hit, [data-testid=own-board] .cell.sunk-own').length > before, shotsBefore, WAIT);
      await bolek.page.click('.resign button');
      await bolek.page.click('.resign button.danger');
      await bolek.page.waitForSelector('[data-testid=result]', WAIT);
    }

    if (hasBots) {
      log('a visitor plays a bot now as a guest, then keeps the account with a password');
      const guest = await newPlayer(browser, 'Guest', { locale: 'en-GB', viewport: { width: 360, height: 740 } });
      await guest.page.click('[data-testid=play-guest]');
      await guest.page.waitForURL(/#\/m\//, WAIT);
      const guestName = await guest.page.textContent('[data-testid=me]');
      assert.match(guestName, /^Guest-[0-9a-f]{6}$/, 'a guest name is made up');
      await guest.page.waitForSelector('[data-testid=ready]', WAIT);

      log('the guest leaves the bot game made for them before the battle: it is ended, not listed as in play');
      {
        const left = matchIdOf(guest.page);
        assert.match(await guest.page.textContent('[data-testid=bot-game-note]'), /Leaving this page before the battle ends this game/, 'the placement panel says leaving ends the game');
        await openMenu(guest.page);
        await guest.page.click('#nav a[href="#/"]');
        await guest.page.locator('[data-testid=bot-game-left]').waitFor(WAIT);
        assert.equal(await guest.page.getAttribute('[data-testid=menu]', 'aria-expanded'), 'false', 'a link followed from the open menu folds it');
        const row = guest.page.locator(`[data-testid=my-matches] [data-match="${left}"]`);
        await row.waitFor(WAIT);
        const rowText = await row.textContent();
        assert.doesNotMatch(rowText, /placing fleets|\d:\d\d left|Resume/, `the row is not in play: ${rowText}`);
        assert.match(rowText, /lost/, `the row shows the game ended: ${rowText}`);
        const ended = await viewOf(guest.page, left);
        assert.equal(ended.phase, 'finished', 'the server ended the match');
        assert.equal(ended.result.reason, 'resigned');
        const live = await guest.page.evaluate(async () => {
          const { token } = JSON.parse(localStorage.getItem('statki.session'));
          return (await fetch('/v1/matches?status=live', { headers: { authorization: `Bearer ${token}` } })).json();
        });
        assert.ok(Array.isArray(live.matches), `the live list: ${JSON.stringify(live)}`);
        assert.ok(!live.matches.some((match) => match.id === left), 'not in the live list');
        log(`left bot game: ${ended.phase} (${ended.result.reason}); lobby row "${rowText.replace(/\s+/g, ' ').trim()}"`);
        // Another bot game from the lobby's list, played this time.
        await guest.page.selectOption('[data-testid=bots] select', 'statki');
        await guest.page.locator('[data-testid=bots] .row button').first().click();
        await guest.page.waitForURL(/#\/m\//, WAIT);
        await guest.page.waitForSelector('[data-testid=ready]', WAIT);
      }

      log('sound: off by default for the guest, switched on, remembered; the hit, sink and end cues heard one by one');
      await openMenu(guest.page);
      assert.equal(await guest.page.getAttribute('[data-testid=sound]', 'aria-pressed'), 'false', 'sound is off by default');
      assert.equal(await cueMark(guest.page), 0, 'no cue plays while sound is off');
      await guest.page.click('[data-testid=sound]');
      await guest.page.waitForSelector('[data-testid=sound][aria-pressed=true]', WAIT);
      await placeAtRandom(guest.page);
      assert.equal(await waitForTurn([guest]), guest);
      await fire(guest.page, 'E5');
      await guest.page.waitForFunction(() => document.querySelectorAll('[data-testid=shot-log-incoming] li').length > 0, null, WAIT);
      await guest.page.reload();
      await guest.page.waitForSelector('[data-testid=target-board] .cell[data-cell=E5]:is(.miss, .hit, .sunk)', WAIT);
      assert.equal(await guest.page.textContent('[data-testid=me]'), guestName, 'the guest account is kept in the browser');
      log('at 360 × 740, on your turn the whole target sea is on screen and tappable, under the clocks and whose shot it is');
      const guestMatch = matchIdOf(guest.page);
      assert.equal(await waitForTurn([guest]), guest, 'the bot waits for the guest');
      const guestView = await viewOf(guest.page, guestMatch);
      // Nothing scrolled by the test: the page brings the sea in when the turn comes.
      const sight = () => guest.page.evaluate(() => {
        const onScreen = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; };
        const tappable = [...document.querySelectorAll('[data-testid=target-board] .cell')].filter((el) => {
          const r = el.getBoundingClientRect();
          return onScreen(el) && document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) === el;
        });
        const bar = document.querySelector('[data-testid=turn-bar]').getBoundingClientRect();
        return {
          cells: tappable.length,
          clocks: [...document.querySelectorAll('[data-testid=players] .clock')].filter(onScreen).length,
          status: onScreen(document.querySelector('[data-testid=status]')) ? document.querySelector('[data-testid=status]').textContent : null,
          bar: Math.round(bar.height),
          size: [innerWidth, innerHeight],
          cell: Math.round(tappable.length ? tappable[0].getBoundingClientRect().width : 0),
        };
      });
      await guest.page.reload();
      await guest.page.waitForSelector('[data-testid=status].mine', WAIT);
      // The page may scroll the sea in when the turn comes: give it a moment to settle.
      let seen = await sight();
      for (let tries = 0; seen.cells < 100 && tries < 20; tries += 1) {
        await guest.page.waitForTimeout(100);
        seen = await sight();
      }
      log(`at 360 × 740 on the guest's turn: ${JSON.stringify(seen)}`);
      assert.deepEqual(seen.size, [360, 740]);
      assert.equal(seen.cells, 100, 'every target cell is on screen and not under the sticky bar');
      assert.equal(seen.clocks, 2, 'both clocks are on screen');
      assert.equal(seen.status, 'Your shot', 'whose shot it is is on screen');
      log('aiming: the ring and dot stand out from the water (light and dark)');
      await guest.page.locator('[data-testid=target-board] .cell[data-cell=D4]').hover();
      for (const colorScheme of ['light', 'dark']) {
        await guest.page.emulateMedia({ colorScheme });
        const pairs = new Map(await boardContrasts(guest.page));
        for (const what of ['aiming ring vs water', 'aiming dot vs water']) {
          assert.ok(pairs.get(what) >= 3, `${what} (${colorScheme}): ${pairs.get(what)}:1`);
        }
        log(`aiming (${colorScheme}): ring ${pairs.get('aiming ring vs water')}:1, dot ${pairs.get('aiming dot vs water')}:1`);
      }
      await guest.page.emulateMedia({ colorScheme: 'light' });
      const mini = guest.page.locator('[data-testid=mini-sea]');
      assert.ok(await mini.isVisible(), 'the own-sea copy is shown on a phone');
      const box = await mini.boundingBox();
      assert.ok(box && box.y >= 0 && box.y + box.height <= 740 && box.x + box.width <= 360, `the copy is on screen with the target sea: ${JSON.stringify(box)}`);
      assert.ok(await guest.page.locator('[data-testid=target-board] .cell[data-cell=J10]').isVisible());
      assert.equal(await mini.locator('i').count(), 100);
      assert.equal(await mini.locator('i.ship, i.hit, i.sunk').count(), guestView.fleet.reduce((sum, ship) => sum + ship.length, 0), 'every ship cell is on the copy');
      assert.equal(await mini.locator('i.miss, i.hit, i.sunk').count(), guestView.incoming.length, 'every shot at you is on the copy');
      assert.ok(await guest.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scroll with the copy');

      log('the guest plays the bot to a win');
      // The guest aims well (43.7 shots on average, 68 at worst in a simulation of 1000
      // statki fleets) and the easy bot fires at random among the cells a ship may still be on
      // (76.5 on average, 54 at best): a loss is rare but possible; then the guest plays another.
      const rulesets = await (await fetch(`${BASE}/v1/rulesets`)).json();
      const statkiRules = (Array.isArray(rulesets) ? rulesets : rulesets.rulesets).find((ruleset) => ruleset.id === 'statki');
      assert.equal(typeof statkiRules.ships_may_touch, 'boolean');
      let guestShots = 1;
      let outcome = '';
      for (let game = 1; game <= 3; game += 1) {
        const playing = matchIdOf(guest.page);
        for (;;) {
          const turn = await waitForTurn([guest]);
          if (!turn) break;
          const view = await viewOf(guest.page, playing);
          if (view.phase !== 'battle') break;
          if (view.turn !== view.you) continue;
          await fire(guest.page, bestShot(view, { shipsMayTouch: statkiRules.ships_may_touch }));
          guestShots += 1;
        }
        await guest.page.waitForSelector('[data-testid=result]', WAIT);
        outcome = await guest.page.textContent('[data-testid=result]');
        log(`game ${game}: ${outcome} after ${guestShots} shots`);
        if (/You won/.test(outcome)) break;
        await guest.page.goto(`${BASE}/#/?at=${Date.now()}`);
        await guest.page.waitForSelector('[data-testid=bots] .row button', WAIT);
        await guest.page.selectOption('[data-testid=bots] select', 'statki');
        await guest.page.locator('[data-testid=bots] .row button').first().click();
        await guest.page.waitForURL(/#\/m\//, WAIT);
        await guest.page.waitForSelector('[data-testid=ready]', WAIT);
        await placeAtRandom(guest.page);
        guestShots = 0;
      }
      assert.match(outcome, /You won/, 'the guest beat the bot');
      {
        // The guest's page has been reloaded since sound was switched on: the cues counted are
        // this document's, heard with sound remembered on.
        assert.equal(await guest.page.getAttribute('[data-testid=sound]', 'aria-pressed'), 'true', 'sound stays on across reloads');
        const played = await guest.page.evaluate(() => window.statkiCues);
        for (const cue of ['hit', 'sunk', 'won']) {
          assert.ok(played.some((c) => c.cue === cue && c.tones > 0), `the guest heard a '${cue}' cue: ${JSON.stringify(played.map((c) => c.cue))}`);
        }
        const counts = {};
        for (const c of played) counts[c.cue] = (counts[c.cue] || 0) + 1;
        log(`cues the guest's page played since its last reload: ${JSON.stringify(counts)}`);
      }
      log('own ships hit by the bot: the hit segment against the hull (light and dark)');
      for (const colorScheme of ['light', 'dark']) {
        await guest.page.emulateMedia({ colorScheme });
        const pairs = new Map(await boardContrasts(guest.page));
        if (!pairs.has('own hit segment vs own hull')) { log('no own ship hit and afloat at the end: not measured here'); break; }
        for (const what of ['own hit segment vs own hull', 'own hit segment vs its rim', 'own hit rim vs water', 'own hit ✕ vs hull']) {
          assert.ok(pairs.get(what) >= 3, `${what} (${colorScheme}): ${pairs.get(what)}:1`);
        }
        log(`own hit (${colorScheme}): vs hull ${pairs.get('own hit segment vs own hull')}:1, rim vs water ${pairs.get('own hit rim vs water')}:1, ✕ ${pairs.get('own hit ✕ vs hull')}:1`);
      }
      await guest.page.emulateMedia({ colorScheme: 'light' });

      log('installable: a manifest with icons, a service worker over the whole site; offline the replay opens, a live match is never shown stale');
      {
        const won = matchIdOf(guest.page);
        const scope = await guest.page.evaluate(() => navigator.serviceWorker.ready.then((registration) => registration.scope));
        assert.equal(scope, `${BASE}/`, 'the service worker covers the whole site');
        const manifest = await guest.page.evaluate(async () => {
          const href = document.querySelector('link[rel=manifest]').href;
          const body = await (await fetch(href)).json();
          const icons = await Promise.all(body.icons.map(async (icon) => {
            const response = await fetch(icon.src);
            return [icon.src, icon.sizes, response.status, response.headers.get('content-type')];
          }));
          return { ...body, icons };
        });
        assert.equal(manifest.display, 'standalone');
        assert.equal(manifest.start_url, '/');
        assert.ok(manifest.icons.some(([, sizes, status, type]) => sizes === '512x512' && status === 200 && type === 'image/png'), `a 512 px PNG icon: ${JSON.stringify(manifest.icons)}`);
        assert.ok(manifest.icons.some(([, sizes, status]) => sizes === '192x192' && status === 200));
        // A live match: a new one against the bot, left in placement.
        await guest.page.goto(`${BASE}/#/?at=${Date.now()}`);
        await guest.page.waitForSelector('[data-testid=bots] .row button', WAIT);
        await guest.page.locator('[data-testid=bots] .row button').first().click();
        await guest.page.waitForURL(/#\/m\//, WAIT);
        await guest.page.waitForSelector('[data-testid=placed-count]', WAIT);
        const liveUrl = guest.page.url();
        await guest.page.goto(`${BASE}/#/m/${won}/replay`);
        await guest.page.waitForFunction(() => /(\d+) of \1/.test((document.querySelector('[data-testid=replay-position]')?.textContent || '')), null, WAIT);
        const position = await guest.page.textContent('[data-testid=replay-position]');
        offline.add(guest.label);
        await guest.context.setOffline(true);
        try {
          await guest.page.reload();
          await guest.page.waitForFunction((text) => document.querySelector('[data-testid=replay-position]')?.textContent === text, position, WAIT);
          assert.ok(await guest.page.locator('[data-testid=replay-board-0] .cell.ship').count() > 0, 'the replay’s seas are drawn offline');
          await guest.page.goto(liveUrl);
          await guest.page.reload();
          await guest.page.waitForSelector('main .form-error', WAIT);
          assert.equal(await guest.page.locator('[data-testid=own-board]').count(), 0, 'no kept picture of a live match is shown offline');
        } finally {
          await guest.context.setOffline(false);
          offline.delete(guest.label);
        }
        log(`offline: the replay of ${won.slice(0, 8)} at “${position}”, the live match refused; manifest icons ${manifest.icons.map(([src, sizes]) => `${src} ${sizes}`).join(', ')}`);
      }
      if (await ala.page.locator('#login-name').count()) {
        await guest.page.click('#nav a[href^="#/p/"]');
        await guest.page.fill('#new-password', 'gość-ma-hasło-8');
        await guest.page.click('[data-testid=account] button[type=submit]');
        await guest.page.waitForSelector('.toast:has-text("Password saved.")', WAIT);
      }
      await guest.context.close();
    }

    if (await ala.page.locator('#login-name').count()) {
      log('log in with name and password; a wrong password is refused readably');
      await watcher.page.click('[data-testid=logout]');
      await watcher.page.fill('#login-name', celinaName);
      await watcher.page.fill('#login-password', 'not-the-password');
      await watcher.page.click('[data-testid=login] button[type=submit]');
      const loginRefusal = watcher.page.locator('[data-testid=auth-error]');
      await loginRefusal.filter({ hasText: /\w/ }).waitFor(WAIT);
      assert.equal(await loginRefusal.textContent(), 'Wrong name or password.', 'the refusal is told from its code');
      await watcher.page.fill('#login-password', celinaPassword);
      await watcher.page.click('[data-testid=login] button[type=submit]');
      await watcher.page.waitForSelector('[data-testid=me]', { ...WAIT, state: 'attached' });
      assert.equal(await watcher.page.textContent('[data-testid=me]'), celinaName);

      log('revoke every other session from the profile; this browser keeps a new token');
      const oldToken = await watcher.page.evaluate(() => JSON.parse(localStorage.getItem('statki.session')).token);
      await watcher.page.click('#nav a[href^="#/p/"]');
      await watcher.page.waitForSelector('[data-testid=account] h2:has-text("Change your password")', WAIT);
      await watcher.page.click('[data-testid=account] .revoke button');
      await watcher.page.waitForSelector('.toast:has-text("Every other session has ended")', WAIT);
      const status = await watcher.page.evaluate(async (token) => (await fetch('/v1/me', { headers: { authorization: `Bearer ${token}` } })).status, oldToken);
      assert.equal(status, 401, 'the old token is revoked');
      await watcher.page.reload();
      await watcher.page.waitForSelector('[data-testid=account]', WAIT);
      assert.equal(await watcher.page.textContent('[data-testid=me]'), celinaName);
    } else {
      log('this server has no log-in: skipped');
    }

    assert.deepEqual(errors, [], 'no console errors');
    log('all passed');
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error);
  if (errors.length) console.error('console errors:', errors);
  process.exit(1);
});
