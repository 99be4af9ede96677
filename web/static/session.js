// session.js: signing in and out.

import {http} from './api.js';
import {el, main} from './dom.js';
import {connect} from './live.js';
import {route, stopView} from './router.js';
import {S} from './state.js';

export async function boot() {
  try {
    S.session = await http('GET', '/api/session');
  } catch (e) {
    if (e.status === 401) return showSignIn('');
    return showSignIn(e.message);
  }
  start();
}

export function showSignIn(error) {
  stopView();
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  document.getElementById('who').textContent = '';
  const err = el('p', {class: 'error', id: 'signin-error', role: 'alert'}, error || '');
  const form = el('form', {class: 'signin card', 'aria-labelledby': 'signin-title'},
    el('h1', {id: 'signin-title'}, 'Sign in to fluxd'),
    el('p', {class: 'muted'}, 'Use an API token ("fluxd token create"). It stays on the server; the browser keeps only a session cookie.'),
    el('label', {for: 'token'}, 'API token'),
    el('input', {id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, 'aria-describedby': 'signin-error'}),
    el('label', {for: 'name'}, 'Your name (for commits and history, optional)'),
    el('input', {id: 'name', name: 'name', type: 'text', autocomplete: 'name'}),
    el('p', {}, el('button', {type: 'submit', class: 'primary', id: 'signin'}, 'Sign in')),
    err);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      S.session = await http('POST', '/api/session', {token: form.token.value, name: form.name.value});
      form.token.value = '';
      start();
    } catch (e) {
      err.textContent = e.message;
    }
  });
  main().replaceChildren(form);
  form.token.focus();
}

async function signOut() {
  try { await http('DELETE', '/api/session'); } catch (_) { /* signed out anyway */ }
  if (S.es) S.es.close();
  S.es = null; S.session = null;
  showSignIn('');
}

function start() {
  document.getElementById('nav').hidden = false;
  const so = document.getElementById('signout');
  so.hidden = false;
  so.onclick = signOut;
  const s = S.session;
  document.getElementById('who').textContent = (s.name ? s.name + ' · ' : '') + s.instance + ' · ' + s.role;
  connect();
  if (!location.hash || location.hash === '#') location.hash = '#/services';
  else route();
}
