// A player's public profile: record, ratings per ladder, and match history.

import { h, mount } from '../dom.js';
import { t, rulesetTitle } from '../i18n.js';
import { playerLink, remember, rememberNames } from '../names.js';

export function render(app, main, id) {
  let alive = true;
  const head = h('div');
  const ladders = h('div');
  const history = h('tbody');
  const more = h('div');
  mount(main,
    h('section', { class: 'panel', 'data-testid': 'profile' }, head, ladders),
    h('section', { class: 'panel' }, h('h2', {}, t('profile.history')),
      h('div', { class: 'table-wrap' }, h('table', { class: 'history' },
        h('thead', {}, h('tr', {}, [t('profile.when'), t('profile.ruleset'), t('profile.opponent'), t('profile.outcome')].map((label) => h('th', { scope: 'col' }, label)),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('ladder.actions'))))),
        history)), more));

  async function load() {
    try {
      const player = await app.api.player(id);
      if (!alive) return;
      remember(player.id, player.name);
      mount(head,
        h('h1', {}, player.name),
        h('p', {}, t('profile.record', { wins: player.wins, losses: player.losses, draws: player.draws })),
        id !== app.me.id ? h('a', { class: 'button', href: `#/?opponent=${id}` }, t('ladder.challenge')) : null);
      mount(ladders, h('div', { class: 'table-wrap' }, h('table', { class: 'ladder' },
        h('thead', {}, h('tr', {}, [t('profile.ruleset'), t('ladder.rank'), t('ladder.rating'), t('ladder.games'), t('ladder.wld')].map((label) => h('th', { scope: 'col' }, label)))),
        h('tbody', {}, (player.ladders || []).map((entry) => h('tr', {},
          h('td', {}, h('a', { href: `#/ladder/${entry.ruleset}` }, rulesetTitle(entry.ruleset))),
          h('td', { class: 'num' }, entry.rank ?? '—'),
          h('td', { class: 'num' }, `${Math.round(entry.rating)} ±${Math.round(entry.deviation)}`, entry.provisional ? h('span', { class: 'badge' }, t('ladder.provisional')) : null),
          h('td', { class: 'num' }, entry.games),
          h('td', { class: 'num' }, `${entry.wins}/${entry.losses}/${entry.draws}`)))))));
    } catch (error) {
      mount(head, h('p', { class: 'form-error', role: 'alert' }, error.message));
    }
  }

  async function page(cursor) {
    try {
      const answer = await app.api.playerMatches(id, cursor);
      const { matches } = answer;
      if (!alive) return;
      for (const match of matches) {
        rememberNames(match);
        const opponent = match.players.find((player) => player !== id);
        const result = match.result;
        let outcome = t(`phase.${match.phase}`);
        if (match.phase === 'finished' && result) {
          outcome = !result.winner ? t('profile.draw') : result.winner === id ? t('profile.win') : t('profile.loss');
          outcome += ` · ${t(`reason.${result.reason}`)}`;
        }
        history.append(h('tr', {},
          h('td', {}, new Date(match.created_at).toLocaleString()),
          h('td', {}, rulesetTitle(match.ruleset), match.ranked ? h('span', { class: 'badge ranked' }, t('match.ranked')) : null),
          h('td', {}, opponent ? playerLink(opponent) : '—'),
          h('td', {}, outcome),
          h('td', {}, h('a', { href: `#/m/${match.id}` }, t('lobby.view')),
            match.phase === 'finished' ? [' · ', h('a', { href: `#/m/${match.id}/replay` }, t('end.replay'))] : null)));
      }
      const next = answer.next ? { after: answer.next } : null;
      mount(more, next ? h('button', { type: 'button', class: 'secondary', onclick: () => page(next) }, t('more')) : null);
    } catch (error) {
      mount(more, h('p', { class: 'form-error', role: 'alert' }, error.message));
    }
  }

  /** The signed-in player's own account: set or change the password, revoke other sessions. */
  async function account() {
    if (id !== app.me.id) return;
    await app.whenFeatures();
    if (!alive || !app.features.sessions) return;
    let me;
    try {
      me = await app.api.me();
    } catch {
      return;
    }
    if (!alive) return;
    const message = h('p', { class: 'form-error', role: 'alert' });
    const current = me.has_password
      ? h('label', { for: 'current-password' }, t('account.current'), h('input', { id: 'current-password', type: 'password', autocomplete: 'current-password', required: true }))
      : null;
    const fresh = h('input', { id: 'new-password', type: 'password', autocomplete: 'new-password', minlength: 8, maxlength: 128, required: true });
    const form = h('form', { class: 'account-form', onsubmit: async (event) => {
      event.preventDefault();
      message.textContent = '';
      try {
        await app.api.setPassword(fresh.value, current ? current.querySelector('input').value : null);
        app.toast(t('account.saved'));
        account();
      } catch (error) {
        message.textContent = error.message;
      }
    } },
    h('h2', {}, me.has_password ? t('account.change') : t('account.set')),
    !me.has_password ? h('p', { class: 'muted' }, t('account.why')) : null,
    current,
    h('label', { for: 'new-password' }, t('account.new'), fresh),
    message,
    h('button', { type: 'submit' }, t('account.save')));
    const revoke = h('div', { class: 'revoke' },
      h('p', { class: 'muted' }, t('account.revoke_help')),
      h('button', { type: 'button', class: 'secondary', onclick: async () => {
        try {
          app.replaceToken(await app.api.revokeTokens());
          app.toast(t('account.revoked'));
        } catch (error) {
          app.error(error);
        }
      } }, t('account.revoke')));
    mount(accountBox, h('section', { class: 'panel', 'data-testid': 'account' }, form, revoke));
  }

  const accountBox = h('div');
  main.append(accountBox);
  load();
  account();
  page({});
  return () => { alive = false; };
}
