// dom.js: building elements (never from HTML: every text from the API is
// set as text), links and error boxes, and the labels narrow screens need.

import {signature} from './format.js';
import {S} from './state.js';

// el builds an element: el('td', {class: 'x', 'aria-label': 'y'}, child, 'text', ...).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const main = () => document.getElementById('main');
export function announce(msg) { document.getElementById('announce').textContent = msg; }

// commitLink shows a commit; with fluxd's --git-web-url, as a link to
// its page on the forge.
export function commitLink(c) {
  if (!c) return '';
  const short = el('code', {}, c.slice(0, 12));
  const base = S.session && S.session.gitWebUrl;
  if (!base) return short;
  return el('a', {href: base + '/' + encodeURIComponent(c), class: 'commit', rel: 'noreferrer noopener', target: '_blank', title: 'commit ' + c + ' on the forge'}, short);
}

export function serviceLink(id) { return el('a', {href: '#/service/' + encodeURIComponent(id)}, id); }

// signatureBadge is an image's signature verification as a badge, or ''
// where no verification profile applies.
export function signatureBadge(v) {
  const s = signature(v);
  return s ? el('span', {class: 'badge signature ' + s.cls, title: s.title, 'data-outcome': v.outcome}, s.text) : '';
}
export function errorBox(e) { return el('p', {class: 'error', role: 'alert'}, e.message || String(e)); }

// On a narrow screen the tables reflow into cards (style.css); each cell
// is labelled with its column's heading, which the CSS shows before it.
function labelCells(root) {
  const tables = Array.from(root.querySelectorAll('table'));
  if (root.tagName === 'TABLE') tables.push(root);
  for (const t of tables) {
    const heads = Array.from(t.querySelectorAll('thead th')).map((th) => th.textContent);
    for (const tr of t.querySelectorAll('tbody > tr')) {
      Array.from(tr.children).forEach((td, i) => { if (heads[i] && !td.hasAttribute('data-label')) td.setAttribute('data-label', heads[i]); });
    }
  }
}
new MutationObserver((ms) => {
  for (const m of ms) for (const n of m.addedNodes) if (n.nodeType === 1) labelCells(n.closest('table') || n);
}).observe(document.documentElement, {childList: true, subtree: true});
