// router.js: which view the URL's hash shows, and its refreshes.

import {main} from './dom.js';
import {S} from './state.js';
import {historyView} from './views/history.js';
import {jobView} from './views/job.js';
import {jobsView} from './views/jobs.js';
import {pipelinesView} from './views/pipelines.js';
import {serviceView} from './views/service.js';
import {servicesView} from './views/services.js';

export function stopView() {
  if (S.timer) clearInterval(S.timer);
  S.timer = null;
  S.view = null;
}

export function route() {
  if (!S.session) return;
  stopView();
  const [path] = (location.hash || '#/services').split('?');
  const [, name, ...rest] = path.split('/');
  const arg = decodeURIComponent(rest.join('/'));
  for (const a of document.querySelectorAll('[data-nav]')) {
    const cur = a.dataset.nav === name || (a.dataset.nav === 'services' && name === 'service') || (a.dataset.nav === 'jobs' && name === 'job');
    if (cur) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const views = {services: servicesView, service: serviceView, jobs: jobsView, job: jobView, history: historyView, pipelines: pipelinesView};
  (views[name] || servicesView)(arg);
  main().focus();
}

export function refreshView() { if (S.view) S.view.refresh(); }

// setView shows a view and refreshes it every so often: never while a
// refresh of it still runs, so a slow fluxd is not asked again and again
// (one asked for meanwhile runs once after it), nor while the tab is
// hidden; it refreshes when the tab shows again.
const followerPoll = 5000;
export function setView(name, arg, refresh, every) {
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

// hashParams are the filters kept in the URL's hash (#/services?q=web).
export function hashParams() { return new URLSearchParams(location.hash.split('?')[1] || ''); }

// keepInHash writes a view's filters into the URL, without a new history
// entry or a hashchange (which would build the view again): a reload or
// a shared link shows the same.
export function keepInHash(view, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const h = '#/' + view + (q.toString() ? '?' + q : '');
  if (location.hash !== h) history.replaceState(null, '', h);
}
