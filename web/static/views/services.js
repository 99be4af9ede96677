// views/services.js: the services, with their health, images, automation
// and policy.

import {editFilters, setAutomated, setLock, startRelease, startRollback, startSync} from '../actions.js';
import {api} from '../api.js';
import {commitLink, el, errorBox, main} from '../dom.js';
import {ago, clock, until} from '../format.js';
import {hashParams, keepInHash, setView} from '../router.js';
import {S, user} from '../state.js';

// The health of a service, as the counts above the services name it: one
// of ready, progressing or failed, and drifted and locked besides.
const healths = [['ready', 'ok'], ['progressing', 'run'], ['failed', 'bad'], ['drifted', 'warn'], ['locked', 'warn']];
function healthOf(s) {
  const h = [];
  if (s.syncState === 'failed' || (s.automation && s.automation.state === 'failing')) h.push('failed');
  else h.push(s.status === 'ready' ? 'ready' : 'progressing');
  if (s.syncState === 'drifted') h.push('drifted');
  if (s.locked) h.push('locked');
  return h;
}

function namespaceOf(id) { return id.split(':')[0]; }

// matches says whether a service matches the search: its name or one of
// its images (running or in git) contains it.
function matches(s, q) {
  if (!q) return true;
  q = q.toLowerCase();
  if (s.id.toLowerCase().includes(q)) return true;
  return (s.containers || []).some((c) => (c.image || '').toLowerCase().includes(q) || (c.gitImage || '').toLowerCase().includes(q));
}

export function servicesView() {
  const p = hashParams();
  const f = {q: p.get('q') || '', ns: p.get('ns') || '', health: p.get('health') || ''};
  const search = el('input', {id: 'svc-q', type: 'search', value: f.q, placeholder: 'name or image', autocomplete: 'off'});
  const nsSel = el('select', {id: 'svc-ns'});
  const counts = el('div', {id: 'health-counts', class: 'counts', role: 'group', 'aria-label': 'Health: show only'});
  const form = el('form', {class: 'filters', role: 'search', 'aria-label': 'Filter services'},
    el('label', {}, 'Search', search), el('label', {}, 'Namespace', nsSel), counts);
  form.addEventListener('submit', (ev) => ev.preventDefault());
  const syncBtn = S.session.canAct && S.session.syncs
    ? el('button', {type: 'button', id: 'sync', onclick: startSync, title: 'Apply everything in git to the cluster, its dry run shown first'}, 'Sync…') : '';
  // Release all: every service to the newest image its policy allows (locked
  // ones skipped), the plan shown first, as 'fluxctl release --all
  // --update-all-images' does.
  const allBtn = S.session.canAct
    ? el('button', {type: 'button', id: 'release-all', onclick: () => startRelease({all: true, allLatest: true}, 'Release all: plan'), title: 'Every service to the newest image its policy allows, the plan shown first'}, 'Release all…') : '';
  const body = el('div', {id: 'services-body'}, el('p', {class: 'muted'}, 'Loading…'));
  main().replaceChildren(el('div', {class: 'title'}, el('h1', {}, 'Services'), allBtn, syncBtn), el('div', {id: 'notifications'}), form, body);
  renderNotifications();
  let last = null;
  const render = () => {
    if (!last) return;
    const [list, plan] = last;
    const all = list.services || [];
    // The namespaces offered are the services'; one from the URL that
    // none has yet is kept, so the filter it asks for shows.
    const nss = Array.from(new Set(all.map((s) => namespaceOf(s.id)).concat(f.ns ? [f.ns] : []))).sort();
    nsSel.replaceChildren(el('option', {value: ''}, 'all namespaces'), ...nss.map((n) => el('option', {value: n, selected: n === f.ns}, n)));
    const inScope = all.filter((s) => (!f.ns || namespaceOf(s.id) === f.ns) && matches(s, f.q));
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.health : undefined;
    counts.replaceChildren(...healths.map(([h, cls]) => {
      const n = inScope.filter((s) => healthOf(s).includes(h)).length;
      return el('button', {type: 'button', class: 'count ' + cls, 'data-health': h, 'aria-pressed': f.health === h ? 'true' : 'false',
        'aria-label': n + ' ' + h + (f.health === h ? ', shown alone: click to show all' : ': click to show only these'),
        onclick: () => { f.health = f.health === h ? '' : h; keep(); render(); }}, el('strong', {}, String(n)), ' ', h);
    }));
    if (focused) { const b = counts.querySelector('[data-health="' + focused + '"]'); if (b) b.focus(); }
    const shown = inScope.filter((s) => !f.health || healthOf(s).includes(f.health));
    body.replaceChildren(servicesTable(list, plan, shown, f));
  };
  const keep = () => keepInHash('services', f);
  search.addEventListener('input', () => { f.q = search.value.trim(); keep(); render(); });
  nsSel.addEventListener('change', () => { f.ns = nsSel.value; keep(); render(); });
  S.clearFilters = () => { f.q = ''; f.ns = ''; f.health = ''; search.value = ''; keep(); render(); };
  setView('services', '', async () => {
    try {
      last = await Promise.all([
        api('ListServices', {}),
        api('Release', {spec: {all: true, allLatest: true, user: user()}, kind: 'RELEASE_KIND_PLAN'}).catch((e) => ({error: e.message})),
      ]);
      render();
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  }, 15000);
}

export function renderNotifications() {
  const box = document.getElementById('notifications');
  if (!box) return;
  if (!S.notifications.length) { box.replaceChildren(); return; }
  box.replaceChildren(el('section', {class: 'card', 'aria-labelledby': 'notif-title'},
    el('h2', {id: 'notif-title'}, 'Image pushes, as they arrive'),
    el('ul', {class: 'plain', id: 'notification-list'}, S.notifications.map((n) =>
      el('li', {}, clock(n.at), ' — ', el('code', {}, n.repository), ': ', String(n.tags), ' tags; automated services using it are checked now')))));
}

function newestByContainer(plan, id) {
  const out = {};
  if (!plan || !plan.plan) return out;
  for (const it of plan.plan.items || []) {
    if (it.service !== id) continue;
    for (const u of it.updates || []) out[u.container] = u.target;
    out._reason = it.action === 'skip' ? it.reason : '';
  }
  return out;
}

function servicesTable(list, plan, shown, f) {
  const git = list.git || {};
  const total = (list.services || []).length;
  const head = el('p', {class: 'muted'}, 'Git ', commitLink(git.revision),
    git.lastSync ? ', remote last reached ' + ago(git.lastSync) : '', git.error ? el('span', {class: 'bad'}, ' — git error: ' + git.error) : '',
    plan.error ? el('span', {class: 'warn'}, ' — newest images unknown: ' + plan.error) : '');
  const rows = shown.map((s) => serviceRow(s, newestByContainer(plan, s.id), !plan.error));
  const filtered = f.q || f.ns || f.health;
  return el('div', {}, head, filtered && !shown.length ? el('p', {id: 'services-empty', role: 'status'}, 'No service matches the filters. ',
    el('button', {type: 'button', id: 'clear-filters', onclick: () => S.clearFilters()}, 'Show all ' + total + ' services')) : '',
  el('table', {id: 'services', 'aria-label': 'Services'},
    el('caption', {}, (filtered ? shown.length + ' of ' + total : total) + ' services; each container\'s running image, the image git asks for, and the newest its policy allows'),
    el('thead', {}, el('tr', {}, ['Service', 'Status', 'Containers', 'Automation', 'Policy', 'Actions'].map((h) => el('th', {scope: 'col'}, h)))),
    el('tbody', {}, rows)));
}

// syncCell says how the service stands against git when fluxd syncs
// (--sync-interval): synced, drifted (and how) or failed (and why).
function syncCell(s) {
  if (!s.syncState) return '';
  const cls = {synced: 'ok', drifted: 'warn', failed: 'bad'}[s.syncState] || 'muted';
  return el('div', {class: 'sync'}, el('span', {class: 'badge ' + cls, title: 'against git'}, s.syncState === 'on-leader' ? 'sync on leader' : s.syncState),
    s.syncDetail ? el('div', {class: cls === 'bad' ? 'bad' : 'warn'}, s.syncDetail) : '');
}

function serviceRow(s, newest, planKnown) {
  const r = s.replicas || {};
  const containers = el('ul', {class: 'plain'}, (s.containers || []).map((c) => el('li', {},
    el('strong', {}, c.name), c.init ? ' (init)' : '', el('br'),
    s.status === 'not in cluster' ? [el('span', {class: 'muted'}, 'not in the cluster'), el('br')] :
    s.status === 'not watched' ? [el('span', {class: 'muted'}, 'not watched: fluxd does not release it'), el('br')] : ['running ', el('code', {}, c.image), el('br')],
    s.inGit ? ['git ', el('code', {}, c.gitImage || '—'), c.goal ? el('span', {class: 'warn'}, ' (not running yet)') : '', el('br')] : el('span', {class: 'muted'}, 'not in git'),
    planKnown && s.inGit ? ['newest allowed ', newest[c.name] ? el('code', {class: 'run'}, newest[c.name]) : el('span', {class: 'muted'}, newest._reason ? 'not released: ' + newest._reason : 'up to date')] : '')));
  const policy = policyCell(s);
  return el('tr', {'data-service': s.id},
    el('td', {}, el('a', {href: '#/service/' + encodeURIComponent(s.id)}, s.id)),
    el('td', {}, el('span', {class: 'badge ' + (s.status === 'ready' ? 'ok' : 'run')}, s.status), el('br'),
      el('span', {class: 'muted'}, (r.ready || 0) + '/' + (r.desired || 0) + ' ready'), syncCell(s)),
    el('td', {}, containers),
    el('td', {}, automationCell(s)),
    el('td', {}, policy),
    el('td', {}, serviceActions(s)));
}

// policyCell says how a service is released: automated or manual, its
// lock (by whom, when, why), its tag filters and its policy's problems.
export function policyCell(s) {
  return !s.inGit ? el('span', {class: 'muted'}, 'no policy: not in git') : el('div', {},
    s.automated ? el('span', {class: 'badge run'}, 'automated') : el('span', {class: 'badge muted'}, 'manual'), ' ',
    s.locked ? el('span', {class: 'badge warn'}, 'locked') : '',
    // The badge says locked; the line under it says by whom, when and why,
    // when any of those is known.
    s.locked && (s.lockedBy || s.lockedAt || s.lockMessage) ? el('div', {class: 'warn'}, 'locked', s.lockedBy ? ' by ' + s.lockedBy : '', s.lockedAt ? ' ' + ago(s.lockedAt) : '', s.lockMessage ? ' — ' + s.lockMessage : '') : '',
    Object.entries(s.tagFilters || {}).map(([k, v]) => el('div', {}, 'filter ', el('code', {}, k + ' = ' + v))),
    (s.warnings || []).map((w) => el('div', {class: 'warn', role: 'note'}, '⚠ ' + w)));
}

export function automationCell(s) {
  const a = s.automation;
  if (!s.automated) return el('span', {class: 'muted'}, 'not automated');
  if (!a) return el('span', {class: 'muted'}, 'automated; this replica does not run the automator');
  const parts = [];
  switch (a.state) {
    case 'releasing':
      parts.push(el('span', {class: 'badge run'}, 'releasing'), ' job ', el('a', {href: '#/job/' + a.jobId}, a.jobId));
      break;
    case 'failing':
      parts.push(el('span', {class: 'badge bad'}, 'failing'), el('div', {class: 'bad'}, a.lastError),
        el('div', {}, 'failed ' + a.failures + ' times; next retry ' + until(a.next)));
      break;
    case 'refreshing':
      parts.push(el('span', {class: 'badge run'}, 'refreshing'));
      break;
    default:
      // The words of 'fluxctl list-services': up to date, waiting.
      parts.push(el('span', {class: 'badge ok'}, a.state === 'uptodate' ? 'up to date' : a.state));
      if (a.next) parts.push(el('div', {}, 'next check ' + until(a.next)));
  }
  if (a.lastCheck) parts.push(el('div', {class: 'muted'}, 'last checked ' + ago(a.lastCheck) + (a.decision ? ': ' + a.decision : '')));
  else if (a.decision) parts.push(el('div', {class: 'muted'}, a.decision));
  return el('div', {}, parts);
}

export function serviceActions(s, full) {
  if (!S.session.canAct) return el('span', {class: 'muted'}, 'view only');
  const id = s.id;
  return el('div', {class: 'actions'},
    s.inGit ? el('button', {type: 'button', 'aria-label': 'Release the newest images of ' + id, onclick: () => startRelease({services: [id], allLatest: true})}, 'Release…') : '',
    s.inGit ? (s.locked
      ? el('button', {type: 'button', 'aria-label': 'Unlock ' + id, onclick: () => setLock(id, false)}, 'Unlock')
      : el('button', {type: 'button', 'aria-label': 'Lock ' + id, onclick: () => setLock(id, true)}, 'Lock…')) : '',
    full && s.inGit ? [
      s.automated
        ? el('button', {type: 'button', id: 'automate-toggle', 'aria-label': 'Deautomate ' + id, onclick: () => setAutomated(id, false)}, 'Deautomate')
        : el('button', {type: 'button', id: 'automate-toggle', 'aria-label': 'Automate ' + id, onclick: () => setAutomated(id, true)}, 'Automate'),
      el('button', {type: 'button', id: 'edit-filters', 'aria-label': 'Tag filters of ' + id, onclick: () => editFilters(s)}, 'Tag filters…'),
      el('button', {type: 'button', id: 'rollback', 'aria-label': 'Roll back ' + id, onclick: () => startRollback(id)}, 'Roll back…')] : '');
}
