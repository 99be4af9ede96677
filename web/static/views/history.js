// views/history.js: the history of releases and policy changes, filtered.

import {startRollback} from '../actions.js';
import {api, jobsByCommit} from '../api.js';
import {commitLink, el, errorBox, main, serviceLink, signatureBadge} from '../dom.js';
import {when} from '../format.js';
import {keepInHash, setView} from '../router.js';
import {S} from '../state.js';

const eventTypes = ['', 'release', 'automated-release', 'rollback', 'failed', 'cancelled', 'automate', 'deautomate', 'lock', 'unlock', 'policy', 'sync',
  'promoted', 'verified', 'promotion-failed', 'awaiting-approval', 'approved', 'paused', 'resumed'];
export function historyView() {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  const svc = el('input', {id: 'f-service', type: 'text', value: q.get('service') || '', placeholder: 'namespace:kind/name'});
  const typ = el('select', {id: 'f-type'}, eventTypes.map((t) => el('option', {value: t, selected: t === (q.get('type') || '')}, t || 'any')));
  const usr = el('input', {id: 'f-user', type: 'text', value: q.get('user') || ''});
  const body = el('div', {});
  const form = el('form', {class: 'filters', role: 'search', 'aria-label': 'Filter history'},
    el('label', {}, 'Service', svc), el('label', {}, 'Type', typ), el('label', {}, 'User', usr),
    el('button', {type: 'submit'}, 'Filter'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    keepInHash('history', {service: svc.value.trim(), type: typ.value, user: usr.value.trim()});
    S.view.refresh();
  });
  main().replaceChildren(el('h1', {}, 'History'), form, body);
  setView('history', '', async () => {
    try {
      const [r, jobs] = await Promise.all([api('History', {service: svc.value.trim(), type: typ.value, user: usr.value.trim(), limit: 200}), jobsByCommit()]);
      body.replaceChildren(historyTable(r.events || [], jobs));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  }, 0);
}

// historyTable lists events; on a service's page (svc given) a deployer
// may roll back to the image a release replaced.
export function historyTable(evs, jobs, svc) {
  const running = new Set(((svc && svc.containers) || []).map((c) => c.image));
  const rollbacks = (e) => {
    if (!svc || !S.session.canAct || !svc.inGit || e.error || (e.type !== 'release' && e.type !== 'automated-release' && e.type !== 'rollback')) return '';
    const froms = new Set((e.changes || []).filter((c) => c.service === svc.id && c.from && c.from !== c.to && !running.has(c.from)).map((c) => c.from));
    return Array.from(froms).map((f) => el('div', {}, el('button', {type: 'button', class: 'rollback', 'aria-label': 'Roll back ' + svc.id + ' to ' + f, onclick: () => startRollback(svc.id, f)}, 'Roll back to ' + f.split(':').pop())));
  };
  return el('table', {id: 'history', 'aria-label': 'History'},
    el('caption', {}, evs.length + ' events, newest first'),
    el('thead', {}, el('tr', {}, ['Ended', 'Type', 'Services', 'User', 'What', 'Commit'].map((h) => el('th', {scope: 'col'}, h)))),
    el('tbody', {}, evs.map((e) => el('tr', {},
      // When it ended, as fluxctl history shows it: rows are in the order
      // they were recorded, and a failed release ends after its rollback.
      el('td', {}, when(e.endedAt || e.startedAt)),
      el('td', {}, el('span', {class: 'badge ' + (e.error ? 'bad' : 'muted')}, e.type)),
      el('td', {}, (e.services || []).map((s) => el('div', {}, serviceLink(s)))),
      el('td', {}, e.user || ''),
      el('td', {}, e.message || '', (e.changes || []).map((c) => el('div', {class: 'change'}, c.container, ': ', el('code', {}, c.from), ' → ', el('code', {}, c.to), c.verification ? [' ', signatureBadge(c.verification)] : '')), e.error ? el('div', {class: 'bad'}, e.error) : '', rollbacks(e)),
      el('td', {}, commitLink(e.commit), jobs && jobs.get(e.commit) ? [' ', el('a', {href: '#/job/' + jobs.get(e.commit), class: 'job-link'}, 'job ' + jobs.get(e.commit))] : '')))));
}
