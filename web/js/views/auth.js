// Signing in: register a name (with an optional password where the server keeps
// accounts) or log in with name and password. The session is kept in localStorage.

import { h, mount } from '../dom.js';
import { t } from '../i18n.js';
import { rememberBotGame } from '../botgames.js';

export function render(app, main) {
  const message = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'auth-error' });
  const busy = (form, on) => form.querySelectorAll('button, input').forEach((el) => { el.disabled = on; });

  async function submit(event, action) {
    event.preventDefault();
    const form = event.target;
    const data = new FormData(form);
    message.textContent = '';
    busy(form, true);
    try {
      const answer = await action(String(data.get('name') || '').trim(), String(data.get('password') || ''));
      app.signIn({ id: answer.id, name: answer.name, token: answer.token });
    } catch (error) {
      message.textContent = error.message;
      busy(form, false);
    }
  }

  const passwordField = (id, required) => h('label', { for: id }, t(required ? 'auth.password' : 'auth.password_optional'),
    h('input', { id, name: 'password', type: 'password', autocomplete: required ? 'current-password' : 'new-password', minlength: required ? null : 8, maxlength: 128, required, 'aria-describedby': required ? null : `${id}-help` }),
    required ? null : h('span', { id: `${id}-help`, class: 'field-help' }, t('auth.password_help')));

  const register = h('form', { class: 'panel', 'data-testid': 'register', onsubmit: (event) => submit(event, (name, password) => app.api.register(name, password)) },
    h('h2', {}, t('auth.register')),
    h('label', { for: 'register-name' }, t('auth.name'),
      h('input', { id: 'register-name', name: 'name', autocomplete: 'username', required: true, maxlength: 32 })),
    app.features.password ? passwordField('register-password', false) : null,
    h('button', { type: 'submit' }, t('auth.register_button')));

  const login = app.features.sessions
    ? h('form', { class: 'panel', 'data-testid': 'login', onsubmit: (event) => submit(event, (name, password) => app.api.login(name, password)) },
      h('h2', {}, t('auth.login')),
      h('label', { for: 'login-name' }, t('auth.name'),
        h('input', { id: 'login-name', name: 'name', autocomplete: 'username', required: true })),
      passwordField('login-password', true),
      h('button', { type: 'submit' }, t('auth.login_button')))
    : null;

  // A visitor plays a bot at once: a guest account with a generated name, kept in this
  // browser like any other; a password set later on the profile makes it a full account.
  async function playGuest(event) {
    const button = event.currentTarget;
    button.disabled = true;
    message.textContent = '';
    try {
      const suffix = Array.from(crypto.getRandomValues(new Uint8Array(3)), (byte) => byte.toString(16).padStart(2, '0')).join('');
      const guest = await app.api.register(`${t('auth.guest_name')}-${suffix}`);
      app.signIn({ id: guest.id, name: guest.name, token: guest.token }, { go: false });
      const bots = await app.api.bots();
      const bot = bots.find((candidate) => candidate.level === 'easy') || bots[0];
      const match = await app.api.createMatch({ ruleset: 'statki', ranked: false, opponent: bot.id });
      rememberBotGame(match.id);
      app.toast(t('auth.guest_welcome', { name: guest.name }));
      app.navigate(`#/m/${match.id}`);
    } catch (error) {
      message.textContent = error.message;
      button.disabled = false;
    }
  }

  mount(main,
    h('section', { class: 'hero' },
      h('h1', {}, t('app.title')),
      h('p', { class: 'lead' }, t('app.tagline')),
      app.features.bots ? h('p', { class: 'guest' },
        h('button', { type: 'button', 'data-testid': 'play-guest', onclick: playGuest }, t('auth.guest_button')),
        ' ', h('span', { class: 'muted' }, t('auth.guest_help'))) : null),
    message,
    h('div', { class: 'columns' }, register, login));
  return null;
}
