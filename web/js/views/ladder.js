// The ranked ladder of one rule set, with a challenge button beside each player.

import { h, mount } from '../dom.js';
import { t, rulesetTitle } from '../i18n.js';
import { playerLink, remember } from '../names.js';

export function render(app, main, ruleset) {
  let alive = true;
  const tabs = h('nav', { class: 'tabs', 'aria-label': t('ladder.rulesets') });
  const table = h('div', { 'data-testid': 'ladder' });
  const more = h('div');
  mount(main, h('section', { class: 'panel' }, h('h1', {}, t('ladder.title', { ruleset: rulesetTitle(ruleset) })), tabs, table, more));

  app.rulesets().then((rulesets) => {
    if (!alive) return;
    mount(tabs, rulesets.map((r) => h('a', { href: `#/ladder/${r.id}`, 'aria-current': r.id === ruleset ? 'page' : null }, rulesetTitle(r.id))));
  }).catch(() => {});

  const body = h('tbody');
  async function page(after) {
    try {
      const answer = await app.api.ladder(ruleset, after);
      if (!alive) return;
      for (const ladderEntry of answer.entries) {
        const entry = { ...ladderEntry, player: ladderEntry.player_id || ladderEntry.player };
        if (entry.name) remember(entry.player, entry.name);
        body.append(h('tr', {},
          h('td', { class: 'num' }, entry.rank),
          h('td', {}, playerLink(entry.player), entry.provisional ? h('span', { class: 'badge', title: t('ladder.provisional_help') }, t('ladder.provisional')) : null),
          h('td', { class: 'num' }, Math.round(entry.rating)),
          h('td', { class: 'num' }, `±${Math.round(entry.deviation)}`),
          h('td', { class: 'num' }, entry.games),
          h('td', { class: 'num' }, `${entry.wins}/${entry.losses}/${entry.draws}`),
          h('td', {}, entry.player !== app.me.id ? h('a', { class: 'button small secondary', href: `#/?opponent=${entry.player}` }, t('ladder.challenge')) : null)));
      }
      if (!body.children.length) mount(table, h('p', { class: 'empty' }, t('ladder.empty')));
      mount(more, answer.next ? h('button', { type: 'button', class: 'secondary', onclick: () => page(answer.next) }, t('more')) : null);
    } catch (error) {
      mount(table, h('p', { class: 'form-error', role: 'alert' }, error.message));
    }
  }
  // On a phone the table scrolls inside its panel; the page itself never scrolls sideways.
  mount(table, h('div', { class: 'table-wrap' }, h('table', { class: 'ladder' },
    h('thead', {}, h('tr', {},
      [t('ladder.rank'), t('ladder.player'), t('ladder.rating'), t('ladder.deviation'), t('ladder.games'), t('ladder.wld')].map((label) => h('th', { scope: 'col' }, label)),
      h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('ladder.actions'))))),
    body)));
  page(null);
  return () => { alive = false; };
}
