// fluxd's status page. No framework and no inline script (the page's
// Content-Security-Policy forbids both inline code and other origins);
// every text from the API is set as text, never as HTML.
'use strict';

const S = {
  session: null,        // {instance, role, name, csrf, canAct}
  es: null,             // the EventSource
  jobs: new Map(),      // job id -> latest WatchJobResponse-like {job, workloads}
  logs: new Map(),      // job id -> [{seq, time, stage, text}]
  plans: new Map(),     // job id -> its plan: the one confirmed here, or read with the job
  notifications: [],    // newest first
  timer: null,          // the current view's refresh timer
  view: null,           // {name, arg, refresh()}
};

// el builds an element: el('td', {class: 'x', 'aria-label': 'y'}, child, 'text', ...).
function el(tag, attrs, ...children) {
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

const main = () => document.getElementById('main');
function announce(msg) { document.getElementById('announce').textContent = msg; }

async function http(method, path, body) {
  const headers = {'Content-Type': 'application/json'};
  if (S.session && S.session.csrf) headers['X-CSRF-Token'] = S.session.csrf;
  const resp = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin'});
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!resp.ok) {
    const err = new Error((data && data.message) || ('HTTP ' + resp.status));
    err.status = resp.status;
    throw err;
  }
  return data;
}

// api calls a FluxService method through the JSON API.
function api(method, req) {
  return http('POST', '/api/fluxd.v1.FluxService/' + method, req || {});
}

function user() { return (S.session && S.session.name) || 'web:' + (S.session ? S.session.instance : ''); }

// ---- time ----
function ago(ts) {
  if (!ts) return '';
  const s = Math.round((Date.now() - Date.parse(ts)) / 1000);
  if (s < 0) return 'in ' + dur(-s);
  return dur(s) + ' ago';
}
function until(ts) {
  if (!ts) return '';
  const s = Math.round((Date.parse(ts) - Date.now()) / 1000);
  return s <= 0 ? 'now' : 'in ' + dur(s);
}
function dur(s) {
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}
function when(ts) { return ts ? new Date(ts).toLocaleString() : ''; }
function clock(ts) { return ts ? new Date(ts).toLocaleTimeString() : ''; }

// ---- sign-in ----
async function boot() {
  try {
    S.session = await http('GET', '/api/session');
  } catch (e) {
    if (e.status === 401) return showSignIn('');
    return showSignIn(e.message);
  }
  start();
}

function showSignIn(error) {
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

// ---- live events ----
function connect() {
  if (S.es) S.es.close();
  const conn = document.getElementById('conn');
  const es = new EventSource('/api/events');
  S.es = es;
  const live = () => (S.session && S.session.liveEvents === false ? 'polling: a follower replica' : 'live');
  es.onopen = () => { conn.textContent = live(); };
  es.onerror = () => { conn.textContent = 'reconnecting…'; };
  es.addEventListener('hello', () => { conn.textContent = live(); });
  es.addEventListener('reset', () => { S.logs.clear(); refreshView(); });
  es.addEventListener('signedout', () => { es.close(); showSignIn('Your session ended: sign in again.'); });
  es.addEventListener('job', (ev) => onJob(JSON.parse(ev.data)));
  es.addEventListener('log', (ev) => onLog(JSON.parse(ev.data)));
  es.addEventListener('notify', (ev) => onNotify(JSON.parse(ev.data)));
  es.addEventListener('automation', onAutomation);
}

// onAutomation reads the services again after an automator pass or a
// notification, at most once a second however many come.
let automationTimer = null;
function onAutomation() {
  if (automationTimer) return;
  automationTimer = setTimeout(() => {
    automationTimer = null;
    const v = S.view;
    if (v && (v.name === 'services' || v.name === 'service')) v.refresh();
  }, 1000);
}

// onJob merges a job event: it carries the job without its plan (the job
// page reads it once with GetJob) and only the workloads whose progress
// changed, so S.jobs keeps no plan. A finished job is dropped from it.
let jobsTimer = null;
function onJob(ev) {
  const id = ev.job.id;
  const prev = S.jobs.get(id);
  const workloads = new Map(prev ? prev.workloads.map((w) => [w.service, w]) : []);
  for (const w of ev.workloads || []) workloads.set(w.service, w);
  const u = {job: ev.job, workloads: Array.from(workloads.values())};
  if (final(ev.job.state)) S.jobs.delete(id); else S.jobs.set(id, u);
  const v = S.view;
  if (!v) return;
  if (prev && prev.job.state !== u.job.state) announce('Job ' + id + ' ' + stateWord(u.job.state));
  if (v.name === 'job' && v.arg === id) {
    renderJobHead(u);
    // A job opened while queued had no plan yet: read it once it has one.
    if (!S.plans.has(id) && prev && prev.job.stage !== u.job.stage && u.job.stage !== 'queued' && u.job.stage !== 'cloning') v.refresh();
  }
  if (v.name === 'jobs' && !jobsTimer) {
    // Read the jobs again at most once a second, however many events.
    jobsTimer = setTimeout(() => { jobsTimer = null; if (S.view && S.view.name === 'jobs') S.view.refresh(); }, 1000);
  }
  if ((v.name === 'services' || v.name === 'service') && final(u.job.state)) v.refresh();
}

function onLog(l) {
  const lines = S.logs.get(l.jobId);
  if (!lines) return; // not shown: read whole when the job is opened
  const seq = Number(l.seq);
  if (lines.length && Number(lines[lines.length - 1].seq) >= seq) return;
  lines.push(l);
  const v = S.view;
  if (v && v.name === 'job' && v.arg === l.jobId) appendLog(l);
}

function onNotify(n) {
  S.notifications.unshift(n);
  S.notifications.length = Math.min(S.notifications.length, 20);
  announce('Image pushed: ' + n.repository);
  const v = S.view;
  if (v && v.name === 'services') { renderNotifications(); onAutomation(); }
}

// ---- routing ----
function stopView() {
  if (S.timer) clearInterval(S.timer);
  S.timer = null;
  S.view = null;
}

function route() {
  if (!S.session) return;
  stopView();
  const [path] = (location.hash || '#/services').split('?');
  const [, name, ...rest] = path.split('/');
  const arg = decodeURIComponent(rest.join('/'));
  for (const a of document.querySelectorAll('[data-nav]')) {
    const cur = a.dataset.nav === name || (a.dataset.nav === 'services' && name === 'service') || (a.dataset.nav === 'jobs' && name === 'job');
    if (cur) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const views = {services: servicesView, service: serviceView, jobs: jobsView, job: jobView, history: historyView};
  (views[name] || servicesView)(arg);
  main().focus();
}

function refreshView() { if (S.view) S.view.refresh(); }

// setView shows a view and refreshes it every so often: never while a
// refresh of it still runs, so a slow fluxd is not asked again and again
// (one asked for meanwhile runs once after it), nor while the tab is
// hidden; it refreshes when the tab shows again.
const followerPoll = 5000;
function setView(name, arg, refresh, every) {
  let running = false, again = false;
  const guarded = async () => {
    if (running) { again = true; return; } // once more when it ends
    running = true;
    try { await refresh(); } finally { running = false; }
    if (again && S.view && S.view.refresh === guarded) { again = false; guarded(); }
  };
  S.view = {name, arg, refresh: guarded};
  guarded();
  // A follower replica's events do not tell of jobs or automation (they
  // run on the leader): every view polls, every few seconds.
  if (S.session && S.session.liveEvents === false) every = Math.min(every || followerPoll, followerPoll);
  if (every) S.timer = setInterval(() => { if (!document.hidden) guarded(); }, every);
}
document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshView(); });

// commitLink shows a commit; with fluxd's --git-web-url, as a link to
// its page on the forge.
function commitLink(c) {
  if (!c) return '';
  const short = el('code', {}, c.slice(0, 12));
  const base = S.session && S.session.gitWebUrl;
  if (!base) return short;
  return el('a', {href: base + '/' + encodeURIComponent(c), class: 'commit', rel: 'noreferrer noopener', target: '_blank', title: 'commit ' + c + ' on the forge'}, short);
}

function serviceLink(id) { return el('a', {href: '#/service/' + encodeURIComponent(id)}, id); }

// jobsByCommit maps each job's commit to the job, so that a history row
// (which knows its commit) links to the job that made it.
async function jobsByCommit() {
  const m = new Map();
  try {
    const r = await api('ListJobs', {limit: 200});
    for (const j of r.jobs || []) if (j.commit) m.set(j.commit, j.id);
  } catch (_) { /* the history still shows, without job links */ }
  return m;
}

function errorBox(e) { return el('p', {class: 'error', role: 'alert'}, e.message || String(e)); }

// ---- services ----
const stateWords = {JOB_STATE_QUEUED: 'queued', JOB_STATE_RUNNING: 'running', JOB_STATE_SUCCEEDED: 'succeeded', JOB_STATE_FAILED: 'failed', JOB_STATE_CANCELLED: 'cancelled'};
function stateWord(s) { return stateWords[s] || s; }
function final(s) { return s === 'JOB_STATE_SUCCEEDED' || s === 'JOB_STATE_FAILED' || s === 'JOB_STATE_CANCELLED'; }
function stateClass(s) { return {JOB_STATE_SUCCEEDED: 'ok', JOB_STATE_FAILED: 'bad', JOB_STATE_CANCELLED: 'warn'}[s] || 'run'; }

// hashParams are the filters kept in the URL's hash (#/services?q=web).
function hashParams() { return new URLSearchParams(location.hash.split('?')[1] || ''); }

// keepInHash writes a view's filters into the URL, without a new history
// entry or a hashchange (which would build the view again): a reload or
// a shared link shows the same.
function keepInHash(view, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const h = '#/' + view + (q.toString() ? '?' + q : '');
  if (location.hash !== h) history.replaceState(null, '', h);
}

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

function servicesView() {
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

function renderNotifications() {
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
function policyCell(s) {
  return !s.inGit ? el('span', {class: 'muted'}, 'no policy: not in git') : el('div', {},
    s.automated ? el('span', {class: 'badge run'}, 'automated') : el('span', {class: 'badge muted'}, 'manual'), ' ',
    s.locked ? el('span', {class: 'badge warn'}, 'locked') : '',
    // The badge says locked; the line under it says by whom, when and why,
    // when any of those is known.
    s.locked && (s.lockedBy || s.lockedAt || s.lockMessage) ? el('div', {class: 'warn'}, 'locked', s.lockedBy ? ' by ' + s.lockedBy : '', s.lockedAt ? ' ' + ago(s.lockedAt) : '', s.lockMessage ? ' — ' + s.lockMessage : '') : '',
    Object.entries(s.tagFilters || {}).map(([k, v]) => el('div', {}, 'filter ', el('code', {}, k + ' = ' + v))),
    (s.warnings || []).map((w) => el('div', {class: 'warn', role: 'note'}, '⚠ ' + w)));
}

function automationCell(s) {
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

function serviceActions(s, full) {
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

// ---- actions ----
async function setLock(id, lock) {
  try {
    if (lock) {
      const msg = await ask('Lock ' + id, 'Why? (shown to everyone who tries to release it)');
      if (msg === null) return;
      await api('Lock', {service: id, message: msg, user: user()});
      announce(id + ' locked');
    } else {
      await api('Unlock', {service: id, user: user()});
      announce(id + ' unlocked');
    }
  } catch (e) {
    await tell('Could not change the lock of ' + id, e.message);
  }
  refreshView();
}

async function setAutomated(id, on) {
  try {
    await api(on ? 'Automate' : 'Deautomate', {service: id, user: user()});
    announce(id + (on ? ' automated' : ' deautomated'));
  } catch (e) {
    await tell('Could not ' + (on ? 'automate ' : 'deautomate ') + id, e.message);
  }
  refreshView();
}

// editFilters edits a service's tag filters, one per container ("*" or
// empty: any tag), as 'fluxctl policy --tag C=FILTER' does: fluxd checks
// every pattern before it commits anything.
async function editFilters(s) {
  const filters = s.tagFilters || {};
  const names = (s.containers || []).filter((c) => !c.init).map((c) => c.name);
  const inputs = names.map((n) => el('input', {id: 'filter-' + n, type: 'text', value: filters[n] || filters['*'] || '', placeholder: '* (any tag)', autocomplete: 'off', 'data-container': n}));
  const err = el('p', {class: 'error', role: 'alert', id: 'filters-error'});
  const d = el('dialog', {'aria-labelledby': 'filters-title', id: 'filters-dialog'},
    el('form', {method: 'dialog'},
      el('h2', {id: 'filters-title'}, 'Tag filters of ' + s.id),
      el('p', {class: 'muted'}, 'Which tags a release or the automator may pick: semver:~1.2, glob:prod-*, regex:^v[0-9]+$; empty or * for any.'),
      names.flatMap((n, i) => [el('label', {for: 'filter-' + n}, 'Container ' + n), inputs[i]]),
      err,
      el('p', {class: 'actions'}, el('button', {value: 'ok', class: 'primary', id: 'save-filters'}, 'Save'), el('button', {value: 'cancel', formnovalidate: true}, 'Cancel'))));
  document.body.append(d);
  d.showModal();
  d.querySelector('form').addEventListener('submit', async (ev) => {
    if (ev.submitter && ev.submitter.value !== 'ok') return;
    ev.preventDefault();
    const tagFilters = {};
    for (const i of inputs) {
      const v = i.value.trim() || '*';
      if (v !== (filters[i.dataset.container] || filters['*'] || '*')) tagFilters[i.dataset.container] = v;
    }
    if (!Object.keys(tagFilters).length) { d.close(); return; }
    try {
      await api('SetPolicy', {service: s.id, tagFilters, user: user()});
      announce('Tag filters of ' + s.id + ' saved');
      d.close();
      refreshView();
    } catch (e) {
      err.textContent = e.message; // the dialog stays, with what was typed
    }
  });
  d.addEventListener('close', () => d.remove(), {once: true});
}

// previousImage is the image a service ran before its last release that
// changed it, from its history: as 'fluxctl rollback' finds it.
function previousImage(evs, id) {
  for (const ev of evs) {
    if ((ev.type !== 'release' && ev.type !== 'automated-release') || ev.error) continue;
    const froms = new Set((ev.changes || []).filter((c) => c.service === id && c.from && c.from !== c.to).map((c) => c.from));
    if (froms.size === 1) return {image: Array.from(froms)[0]};
    if (froms.size > 1) return {error: 'The last release of ' + id + ' changed several images (' + Array.from(froms).join(', ') + '): roll back to one from a row of its history.'};
  }
  return {error: 'No release of ' + id + ' is recorded, so there is no previous image to roll back to: release an earlier image from its images below.'};
}

// startRollback releases an earlier image, with the plan shown first, as
// 'fluxctl rollback' does: a service the automator releases, and no lock
// holds, is refused (the automator would undo it).
async function startRollback(id, image) {
  const s = S.service && S.service.id === id ? S.service : null;
  if (s && s.automated && !s.locked) {
    return tell('Roll back ' + id + '?', id + ' is automated: the automator would release its newest image again at its next pass, undoing the rollback. Deautomate or lock it first, then roll back.');
  }
  if (!image) {
    let h;
    try { h = await api('History', {service: id, limit: 100}); } catch (e) { return tell('Could not read the history of ' + id, e.message); }
    const p = previousImage(h.events || [], id);
    if (p.error) return tell('No rollback', p.error);
    image = p.image;
  }
  return startRelease({services: [id], image, message: 'rollback to ' + image}, 'Rollback plan');
}

// startRelease shows the plan and executes it only once confirmed, with
// the plan's checksum: if anything changed meanwhile fluxd refuses, as
// 'fluxctl release' does.
async function startRelease(spec, title) {
  spec = Object.assign({user: user()}, spec);
  let resp;
  try {
    resp = await api('Release', {spec, kind: 'RELEASE_KIND_PLAN'});
  } catch (e) {
    return tell('Could not plan the release', e.message);
  }
  const plan = resp.plan || {};
  const updates = (plan.items || []).filter((it) => it.action === 'update');
  const d = el('dialog', {'aria-labelledby': 'plan-title', id: 'plan-dialog'},
    el('h2', {id: 'plan-title'}, title || 'Release plan'),
    planTable(plan),
    el('p', {class: 'muted'}, 'Plan checksum ', el('code', {}, plan.checksum || ''), ' at revision ', el('code', {}, (plan.revision || '').slice(0, 12))),
    el('label', {for: 'release-message'}, 'Message (for the commit and history, optional)'),
    el('input', {id: 'release-message', type: 'text', value: spec.message || '', autocomplete: 'off'}),
    el('form', {method: 'dialog', class: 'actions'},
      el('button', {value: 'release', class: 'primary', id: 'confirm-release', disabled: updates.length === 0}, updates.length ? 'Confirm: release ' + updates.length + ' service(s)' : 'Nothing to release'),
      el('button', {value: 'cancel', id: 'cancel-release'}, 'Cancel')));
  document.body.append(d);
  d.showModal();
  const answer = await new Promise((res) => d.addEventListener('close', () => res(d.returnValue), {once: true}));
  const message = d.querySelector('#release-message').value.trim();
  d.remove();
  if (answer !== 'release') return;
  if (message) spec.message = message; else delete spec.message;
  try {
    const r = await api('Release', {spec, kind: 'RELEASE_KIND_EXECUTE', checksum: plan.checksum});
    // The job runs the plan confirmed here (fluxd checks its checksum):
    // its view shows it at once, before the queued job has a plan of its own.
    S.plans.set(r.jobId, plan);
    location.hash = '#/job/' + r.jobId;
  } catch (e) {
    tell('The release was refused', e.message);
  }
}

// startSync shows what a sync would change (a dry run: fluxd changes
// nothing) and applies git only once confirmed. A sync applies git as it
// is then: should git move meanwhile, the result says so.
async function startSync() {
  const btn = document.getElementById('sync');
  if (btn) btn.disabled = true;
  let dry;
  try {
    announce('Sync: dry run…');
    dry = await api('Sync', {dryRun: true});
  } catch (e) {
    if (btn) btn.disabled = false;
    return tell('Could not run the dry run of a sync', e.message);
  }
  if (btn) btn.disabled = false;
  const changes = (dry.objects || []).filter((o) => o.action !== 'unchanged');
  const unchanged = (dry.objects || []).length - changes.length;
  const d = el('dialog', {'aria-labelledby': 'sync-title', id: 'sync-dialog'},
    el('h2', {id: 'sync-title'}, 'Sync: what it would change'),
    el('p', {class: 'muted'}, 'Dry run at revision ', commitLink(dry.revision), ': ', changes.length + ' to change, ' + unchanged + ' unchanged. Nothing was changed yet.'),
    dry.error ? el('p', {class: 'error'}, dry.error) : '',
    (dry.problems || []).map((pr) => el('p', {class: 'warn', role: 'note'}, '⚠ ' + pr)),
    syncTable(changes, 'Changes of the sync'),
    el('form', {method: 'dialog', class: 'actions'},
      el('button', {value: 'sync', class: 'primary', id: 'confirm-sync'}, changes.length ? 'Confirm: sync ' + changes.length + ' change(s)' : 'Sync anyway'),
      el('button', {value: 'cancel', id: 'cancel-sync'}, 'Cancel')));
  document.body.append(d);
  d.showModal();
  const answer = await new Promise((res) => d.addEventListener('close', () => res(d.returnValue), {once: true}));
  d.remove();
  if (answer !== 'sync') return;
  if (btn) { btn.disabled = true; btn.textContent = 'Syncing…'; }
  let done;
  try {
    done = await api('Sync', {});
  } catch (e) {
    return tell('The sync failed', e.message);
  } finally {
    if (btn) { btn.disabled = false; btn.textContent = 'Sync…'; }
  }
  const did = (done.objects || []).filter((o) => o.action !== 'unchanged');
  const r = el('dialog', {'aria-labelledby': 'sync-result-title', id: 'sync-result'},
    el('h2', {id: 'sync-result-title'}, done.error || did.some((o) => o.action === 'failed') ? 'Synced, with failures' : 'Synced'),
    el('p', {}, 'Revision ', commitLink(done.revision), ': ' + did.length + ' changed' + (done.durationMs ? ', in ' + done.durationMs + ' ms' : '') + '.',
      done.revision !== dry.revision ? el('strong', {class: 'warn'}, ' Git moved since the dry run: this applied the newer revision.') : ''),
    done.error ? el('p', {class: 'error'}, done.error) : '',
    syncTable(did, 'What the sync did'),
    el('form', {method: 'dialog'}, el('button', {class: 'primary', id: 'close-sync'}, 'Close')));
  document.body.append(r);
  r.showModal();
  announce('Synced: ' + did.length + ' changed');
  r.addEventListener('close', () => r.remove(), {once: true});
  refreshView();
}

function syncTable(objs, label) {
  if (!objs.length) return el('p', {class: 'muted'}, 'Everything in the cluster is as git says.');
  const cls = {created: 'run', configured: 'run', deleted: 'warn', failed: 'bad', skipped: 'muted'};
  return el('table', {'aria-label': label, class: 'sync-objects'},
    el('thead', {}, el('tr', {}, ['Object', 'Action', 'Source', 'Changes'].map((h) => el('th', {scope: 'col'}, h)))),
    el('tbody', {}, objs.map((o) => el('tr', {},
      el('td', {}, el('code', {}, o.object)),
      el('td', {}, el('span', {class: 'badge ' + (cls[o.action] || 'muted')}, o.action)),
      el('td', {}, o.source ? el('code', {}, o.source) : ''),
      el('td', {}, (o.diff || []).map((x) => el('div', {}, el('code', {}, x))), o.error ? el('div', {class: 'bad'}, o.error) : '')))));
}

function planTable(plan) {
  return el('table', {'aria-label': 'Plan'},
    el('thead', {}, el('tr', {}, ['Service', 'Action', 'Changes or reason'].map((h) => el('th', {scope: 'col'}, h)))),
    el('tbody', {}, (plan.items || []).map((it) => el('tr', {},
      el('td', {}, it.service),
      el('td', {}, el('span', {class: 'badge ' + (it.action === 'update' ? 'run' : 'muted')}, it.action)),
      el('td', {}, (it.updates || []).map((u) => el('div', {}, el('strong', {}, u.container), ': ', el('code', {}, u.current), ' → ', el('code', {}, u.target))), it.reason || '')))));
}

function ask(title, label) {
  const d = el('dialog', {'aria-labelledby': 'ask-title'},
    el('form', {method: 'dialog'},
      el('h2', {id: 'ask-title'}, title),
      el('label', {for: 'ask-input'}, label),
      el('input', {id: 'ask-input', type: 'text', required: true}),
      el('p', {class: 'actions'}, el('button', {value: 'ok', class: 'primary'}, 'OK'), el('button', {value: 'cancel', formnovalidate: true}, 'Cancel'))));
  document.body.append(d);
  d.showModal();
  return new Promise((res) => d.addEventListener('close', () => {
    const v = d.returnValue === 'ok' ? d.querySelector('input').value : null;
    d.remove();
    res(v);
  }, {once: true}));
}

function tell(title, msg) {
  const d = el('dialog', {'aria-labelledby': 'tell-title', role: 'alertdialog'},
    el('h2', {id: 'tell-title'}, title), el('p', {class: 'error'}, msg),
    el('form', {method: 'dialog'}, el('button', {class: 'primary'}, 'Close')));
  document.body.append(d);
  d.showModal();
  return new Promise((res) => d.addEventListener('close', () => { d.remove(); res(); }, {once: true}));
}

// ---- one service ----
function serviceView(id) {
  const imgs = el('div', {}, el('p', {class: 'muted'}, 'Loading images…'));
  const hist = el('div', {});
  const acts = el('div', {class: 'actions', id: 'service-actions'});
  const res = el('div', {id: 'resources'}, el('p', {class: 'muted'}, 'Loading…'));
  const logBox = el('section', {id: 'pod-log-box', class: 'card', 'aria-labelledby': 'pod-log-title', hidden: true});
  const man = el('div', {id: 'manifest'}, el('p', {class: 'muted'}, 'Loading…'));
  main().replaceChildren(el('h1', {}, id), acts,
    el('h2', {}, 'Resources'), res, logBox,
    el('h2', {}, 'Manifest'), man,
    el('h2', {}, 'Images'), imgs, el('h2', {}, 'History'), hist);
  // The manifest's comparison is a dry run against the API server: read
  // when the view opens, and again on request, not on every refresh.
  loadManifest(id, man);
  setView('service', id, async () => {
    try {
      const [li, h, ls, jobs, rs] = await Promise.all([api('ListImages', {service: id, limit: 30}), api('History', {service: id, limit: 50}), api('ListServices', {}), jobsByCommit(),
        api('GetResources', {service: id}).catch((e) => ({error: e.message}))]);
      const s = (ls.services || []).find((x) => x.id === id);
      S.service = s || null;
      if (s) acts.replaceChildren(serviceActions(s, true), el('div', {id: 'service-policy'}, policyCell(s)), automationCell(s));
      res.replaceChildren(resourcesTree(rs, id));
      imgs.replaceChildren(...((li.services || [])[0] || {containers: []}).containers.map(imagesTable));
      hist.replaceChildren(historyTable(h.events || [], jobs, s), el('p', {}, el('a', {href: '#/history?service=' + encodeURIComponent(id)}, 'All of its history')));
    } catch (e) {
      imgs.replaceChildren(errorBox(e));
    }
  }, 10000);
}

// resourcesTree shows what a workload runs: what it owns (ReplicaSets,
// Jobs), its pods with their status and restarts, and their events.
function resourcesTree(r, id) {
  if (r.error) return errorBox(r);
  if (!r.inCluster) return el('p', {class: 'muted', id: 'resources-none'}, 'Not in the cluster: nothing runs.');
  const owned = r.owned || [], pods = r.pods || [], evs = r.events || [];
  const warnings = evs.filter((e) => e.type === 'Warning').length;
  return el('div', {},
    owned.length ? el('table', {id: 'owned', 'aria-label': 'ReplicaSets and Jobs'},
      el('caption', {}, owned.length + ' ' + owned[0].kind + (owned.length > 1 ? 's' : '') + ', newest first'),
      el('thead', {}, el('tr', {}, ['Name', 'Revision', 'Ready', 'Images', 'Created'].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, owned.map((o) => el('tr', {'data-owned': o.name},
        el('td', {}, el('code', {}, o.name), ' ', el('span', {class: 'muted'}, o.kind)),
        el('td', {}, o.revision || ''),
        el('td', {}, (o.ready || 0) + '/' + (o.desired || 0)),
        el('td', {}, (o.images || []).map((i) => el('div', {}, el('code', {}, i)))),
        el('td', {}, ago(o.createdAt)))))) : '',
    el('table', {id: 'pods', 'aria-label': 'Pods'},
      el('caption', {}, pods.length + (pods.length === 1 ? ' pod' : ' pods')),
      el('thead', {}, el('tr', {}, ['Pod', 'Status', 'Restarts', 'Containers', 'Node', 'Created', 'Log'].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, pods.map((p) => el('tr', {'data-pod': p.name},
        el('td', {}, el('code', {}, p.name), p.owner ? el('div', {class: 'muted'}, 'of ' + p.owner) : ''),
        el('td', {}, el('span', {class: 'badge ' + podClass(p)}, p.status || ''), p.ready ? ' ready' : ''),
        el('td', {class: p.restarts ? 'warn' : ''}, String(p.restarts || 0)),
        el('td', {}, (p.containers || []).map((c) => el('div', {}, el('strong', {}, c.name), c.init ? ' (init)' : '', ' ', c.state || '', c.reason ? ' (' + c.reason + ')' : '', c.restarts ? ', ' + c.restarts + ' restarts' : ''))),
        el('td', {}, p.node || ''),
        el('td', {}, ago(p.createdAt)),
        el('td', {}, S.session.canAct
          ? el('button', {type: 'button', 'aria-label': 'Log of ' + p.name, onclick: () => showPodLog(id, p)}, 'Log')
          : el('span', {class: 'muted', title: 'Pod logs may carry secrets: they need the deployer role'}, 'deployers only')))))),
    // Events fold away unless one warns: a page of Normal events after
    // a few rollouts would push the manifest off a phone's screen.
    el('details', {id: 'events-box', open: evs.some((e) => e.type === 'Warning')},
      el('summary', {}, evs.length ? evs.length + ' recent events' + (warnings ? ', ' + warnings + ' warning' + (warnings > 1 ? 's' : '') : '') : 'No recent events (Kubernetes keeps them for an hour)'),
    el('table', {id: 'events', 'aria-label': 'Events'},
      el('caption', {}, 'Newest first'),
      el('thead', {}, el('tr', {}, ['Last seen', 'Type', 'Object', 'Reason', 'Message'].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, evs.map((e) => el('tr', {},
        el('td', {}, ago(e.lastSeen)),
        el('td', {}, el('span', {class: 'badge ' + (e.type === 'Warning' ? 'warn' : 'muted')}, e.type), e.count > 1 ? ' ×' + e.count : ''),
        el('td', {}, el('code', {}, e.object)),
        el('td', {}, e.reason),
        el('td', {}, e.message)))))));
}

function podClass(p) {
  if (p.status === 'Running' && p.ready) return 'ok';
  if (/BackOff|Err|Fail|OOM|Evicted/.test(p.status || '')) return 'bad';
  return 'run';
}

// showPodLog shows a pod's last lines (fluxd reads at most 1,000 lines
// and 64 KiB; no following).
async function showPodLog(id, p, container) {
  const box = document.getElementById('pod-log-box');
  if (!box) return;
  box.hidden = false;
  const names = (p.containers || []).map((c) => c.name);
  const sel = names.length > 1 ? el('select', {id: 'pod-log-container', 'aria-label': 'Container'}, names.map((n) => el('option', {value: n, selected: n === container}, n))) : '';
  const pre = el('pre', {class: 'log', id: 'pod-log', role: 'log', tabindex: '0', 'aria-labelledby': 'pod-log-title'}, 'Loading…');
  const note = el('p', {id: 'pod-log-note', class: 'muted'});
  box.replaceChildren(el('h3', {id: 'pod-log-title'}, 'Log of ', el('code', {}, p.name)), sel ? el('label', {}, 'Container ', sel) : '', note, pre,
    el('p', {class: 'actions'}, el('button', {type: 'button', id: 'pod-log-reload', onclick: () => showPodLog(id, p, sel ? sel.value : container)}, 'Read again'),
      el('button', {type: 'button', onclick: () => { box.hidden = true; }}, 'Close')));
  if (sel) sel.addEventListener('change', () => showPodLog(id, p, sel.value));
  try {
    const r = await api('GetPodLog', {service: id, pod: p.name, container: container || '', tailLines: 200});
    const lines = r.lines || [];
    note.textContent = 'Container ' + r.container + ': the last ' + lines.length + ' lines' + (r.truncated ? ', cut at 64 KiB' : '') + '.';
    pre.replaceChildren(lines.length ? lines.join('\n') + '\n' : '(the log is empty)');
    pre.scrollTop = pre.scrollHeight;
  } catch (e) {
    pre.hidden = true;
    note.className = 'error';
    note.setAttribute('role', 'alert');
    note.textContent = e.message;
  }
  box.scrollIntoView({block: 'nearest'});
}

// loadManifest shows the workload's manifest in git beside the live
// object, and what applying git would change (fluxd's server-side dry
// run of the apply a release makes: nothing is changed).
async function loadManifest(id, box) {
  let m;
  try {
    m = await api('GetManifest', {service: id});
  } catch (e) {
    return box.replaceChildren(errorBox(e));
  }
  const again = el('button', {type: 'button', id: 'manifest-refresh', onclick: () => { box.replaceChildren(el('p', {class: 'muted'}, 'Comparing…')); loadManifest(id, box); }}, 'Compare again');
  if (!m.git) return box.replaceChildren(el('p', {class: 'muted', id: 'manifest-note'}, m.note || 'Not in git.'), again);
  const cls = {unchanged: 'ok', configured: 'warn', created: 'run'}[m.action] || 'muted';
  const words = {unchanged: 'the cluster is as git says', configured: 'applying git would change it', created: 'not in the cluster: applying git would create it'};
  box.replaceChildren(
    el('p', {}, el('code', {}, m.file + ':' + m.line), ' at ', commitLink(m.revision), ' — ',
      m.action ? el('span', {class: 'badge ' + cls, id: 'manifest-action'}, m.action) : '', ' ', words[m.action] || '', ' ', again),
    m.note ? el('p', {class: 'warn', role: 'note', id: 'manifest-note'}, m.note) : '',
    (m.diff || []).length ? el('section', {class: 'card', 'aria-labelledby': 'diff-title'}, el('h3', {id: 'diff-title'}, 'What applying git would change'),
      el('ul', {class: 'plain', id: 'manifest-diff'}, m.diff.map((d) => el('li', {}, el('code', {}, d))))) : '',
    el('div', {class: 'sides'},
      el('section', {'aria-labelledby': 'git-title'}, el('h3', {id: 'git-title'}, 'In git'), el('pre', {class: 'yaml', id: 'manifest-git', tabindex: '0'}, m.git)),
      el('section', {'aria-labelledby': 'live-title'}, el('h3', {id: 'live-title'}, 'Live'), m.redacted
        ? el('p', {class: 'muted', id: 'manifest-live-redacted'}, 'Shown to deployers and admins only: the live object can hold values set outside git (kubectl set env). The fields applying git would change are listed without their values.')
        : el('pre', {class: 'yaml', id: 'manifest-live', tabindex: '0'}, m.live || '(not in the cluster)'))));
}

function imagesTable(c) {
  const passing = new Set(c.passing || []);
  const rows = (c.available || []).map((im) => {
    const marks = [];
    if (im.ref === c.current) marks.push(el('span', {class: 'badge ok'}, 'running'));
    if (im.tag && im.tag === c.best) marks.push(el('span', {class: 'badge run'}, 'newest allowed'));
    if (c.filter && c.filter !== '*' && !passing.has(im.tag)) marks.push(el('span', {class: 'badge muted'}, 'filtered out'));
    const act = S.session.canAct && im.ref !== c.current && (c.filter === '*' || passing.has(im.tag))
      ? el('button', {type: 'button', 'aria-label': 'Release ' + im.ref, onclick: () => startRelease({services: [S.view.arg], image: im.ref})}, 'Release…') : '';
    return el('tr', {}, el('td', {}, el('code', {}, im.tag || im.ref)), el('td', {}, when(im.createdAt)), el('td', {}, marks), el('td', {}, act));
  });
  return el('section', {class: 'card', 'aria-label': 'Images of container ' + c.container},
    el('h3', {}, 'Container ', c.container),
    el('p', {}, 'running ', el('code', {}, c.current), ' · filter ', el('code', {}, c.filter || '*'), ' · ', String(c.total), ' images',
      c.refreshedAt ? ' · read ' + ago(c.refreshedAt) : '', c.refreshing ? ' · refreshing' : ''),
    c.error ? el('p', {class: 'error'}, c.error) : '', c.refreshError ? el('p', {class: 'warn'}, c.refreshError) : '',
    (c.warnings || []).map((w) => el('p', {class: 'warn', role: 'note'}, '⚠ ' + w)),
    el('table', {'aria-label': 'Images of ' + c.container},
      el('thead', {}, el('tr', {}, ['Tag', 'Created', '', ''].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, rows)));
}

// ---- jobs ----
function jobsView() {
  const body = el('div', {}, el('p', {class: 'muted'}, 'Loading…'));
  main().replaceChildren(el('h1', {}, 'Jobs'), body);
  setView('jobs', '', async () => {
    try {
      const r = await api('ListJobs', {limit: 30});
      body.replaceChildren(el('table', {id: 'jobs', 'aria-label': 'Jobs'},
        el('caption', {}, 'Release jobs, newest first; they run one at a time'),
        el('thead', {}, el('tr', {}, ['Job', 'State', 'Stage', 'Services', 'Commit', 'Created', 'Error'].map((h) => el('th', {scope: 'col'}, h)))),
        el('tbody', {}, (r.jobs || []).map((j) => {
          const live = S.jobs.get(j.id);
          if (live && !final(j.state)) j = Object.assign({}, j, live.job, {plan: j.plan});
          return el('tr', {'data-job': j.id},
            el('td', {}, el('a', {href: '#/job/' + j.id}, j.id)),
            el('td', {}, el('span', {class: 'badge ' + stateClass(j.state)}, stateWord(j.state)), j.queuePosition ? ' #' + j.queuePosition : ''),
            el('td', {}, j.stage),
            el('td', {}, ((j.plan && j.plan.items) || []).filter((it) => it.action === 'update').map((it) => el('div', {}, serviceLink(it.service)))),
            el('td', {}, commitLink(j.commit)),
            el('td', {}, when(j.createdAt)),
            el('td', {class: 'bad'}, j.error || ''));
        }))));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  }, 0);
}

function jobView(id) {
  main().replaceChildren(el('h1', {}, 'Job ', el('code', {}, id)),
    el('div', {id: 'job-head'}, el('p', {class: 'muted'}, 'Loading…')),
    el('h2', {id: 'log-title'}, 'Log'),
    el('pre', {class: 'log', id: 'job-log', role: 'log', 'aria-labelledby': 'log-title', tabindex: '0'}));
  // Lines that come as events while the log is read are kept here.
  if (!S.logs.has(id)) S.logs.set(id, []);
  setView('job', id, async () => {
    try {
      const [g, l] = await Promise.all([api('GetJob', {id}), readLog(id)]);
      // The plan is read here; events carry the job without it.
      if (g.job.plan && (g.job.plan.items || []).length) S.plans.set(id, g.job.plan);
      const known = S.jobs.get(id);
      renderJobHead(known && !final(g.job.state) ? known : {job: g.job, workloads: []});
      const lines = l.lines || [];
      const have = S.logs.get(id) || [];
      // Lines that came as events while the log was read are kept.
      const last = lines.length ? Number(lines[lines.length - 1].seq) : 0;
      S.logs.set(id, lines.concat(have.filter((x) => Number(x.seq) > last)));
      const pre = document.getElementById('job-log');
      pre.replaceChildren();
      for (const x of S.logs.get(id)) appendLog(x);
    } catch (e) {
      document.getElementById('job-head').replaceChildren(errorBox(e));
    }
  }, 0);
}

// readLog reads a job's log, which fluxd answers in pages (5,000 lines
// each): at most 20 pages, the log's first 100,000 lines.
async function readLog(id) {
  const lines = [];
  for (let page = 0, after = 0; page < 20; page++) {
    const r = await api('GetJobLog', {id, after: String(after)});
    const got = r.lines || [];
    if (!got.length) break;
    lines.push(...got);
    after = Number(got[got.length - 1].seq);
    if (got.length < 5000) break;
  }
  return {lines};
}

function renderJobHead(u) {
  const head = document.getElementById('job-head');
  if (!head) return;
  const j = u.job;
  const plan = j.plan || S.plans.get(j.id);
  const canCancel = S.session.canAct && !final(j.state);
  head.replaceChildren(
    el('p', {}, el('span', {class: 'badge ' + stateClass(j.state), id: 'job-state'}, stateWord(j.state)), ' stage ', el('strong', {id: 'job-stage'}, j.stage),
      j.queuePosition ? ' — position ' + j.queuePosition + ' in the queue' : '', j.commit ? [' — commit ', el('span', {id: 'job-commit'}, commitLink(j.commit))] : '',
      ' — created ', when(j.createdAt), j.finishedAt ? ', ended ' + when(j.finishedAt) : ''),
    j.error ? el('p', {class: 'error', id: 'job-error', role: 'alert'}, j.error) : '',
    plan && (plan.items || []).some((it) => it.action === 'update') ? el('p', {id: 'job-services'}, 'Services: ',
      plan.items.filter((it) => it.action === 'update').map((it) => el('span', {class: 'svc'}, serviceLink(it.service), ' (',
        el('a', {href: '#/history?service=' + encodeURIComponent(it.service)}, 'history'), ') '))) : '',
    (u.workloads || []).length ? el('table', {'aria-label': 'Rollout progress'},
      el('thead', {}, el('tr', {}, ['Workload', 'Updated', 'Ready', 'Available'].map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, u.workloads.map((w) => {
        const r = w.replicas || {};
        const pct = r.desired ? Math.round(100 * (r.ready || 0) / r.desired) : 0;
        return el('tr', {},
          el('td', {}, w.service),
          el('td', {}, (r.updated || 0) + '/' + (r.desired || 0)),
          el('td', {}, el('span', {class: 'progress', role: 'progressbar', 'aria-label': 'Ready replicas of ' + w.service, 'aria-valuemin': '0', 'aria-valuemax': String(r.desired || 0), 'aria-valuenow': String(r.ready || 0)}, el('span', {style: null, 'data-pct': pct})), ' ', (r.ready || 0) + '/' + (r.desired || 0)),
          el('td', {}, String(r.available || 0)));
      }))) : '',
    plan ? el('details', {}, el('summary', {}, 'Plan'), planTable(plan)) : '',
    canCancel ? el('p', {}, el('button', {type: 'button', class: 'danger', id: 'cancel-job', onclick: () => cancelJob(j.id)}, 'Cancel job')) : '');
  // Widths from data attributes: the CSP allows no inline style attribute.
  for (const bar of head.querySelectorAll('[data-pct]')) bar.style.width = bar.dataset.pct + '%';
}

function appendLog(l) {
  const pre = document.getElementById('job-log');
  if (!pre) return;
  pre.append(el('span', {class: 't'}, clock(l.time) + ' '), el('span', {class: 's'}, '[' + l.stage + '] '), l.text + '\n');
  pre.scrollTop = pre.scrollHeight;
}

async function cancelJob(id) {
  try {
    await api('CancelJob', {id});
    announce('Cancel asked for job ' + id);
  } catch (e) {
    tell('Could not cancel job ' + id, e.message);
  }
}

// ---- history ----
const eventTypes = ['', 'release', 'automated-release', 'rollback', 'failed', 'cancelled', 'automate', 'deautomate', 'lock', 'unlock', 'policy', 'sync'];
function historyView() {
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
function historyTable(evs, jobs, svc) {
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
      el('td', {}, e.message || '', (e.changes || []).map((c) => el('div', {}, c.container, ': ', el('code', {}, c.from), ' → ', el('code', {}, c.to))), e.error ? el('div', {class: 'bad'}, e.error) : '', rollbacks(e)),
      el('td', {}, commitLink(e.commit), jobs && jobs.get(e.commit) ? [' ', el('a', {href: '#/job/' + jobs.get(e.commit), class: 'job-link'}, 'job ' + jobs.get(e.commit))] : '')))));
}

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

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', boot);
