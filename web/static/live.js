// live.js: the live events: jobs, their logs, image pushes and automator
// passes, merged into what the page shows.

import {events} from './api.js';
import {announce} from './dom.js';
import {final, stateWord} from './format.js';
import {refreshView} from './router.js';
import {showSignIn} from './session.js';
import {S} from './state.js';
import {appendLog, renderJobHead} from './views/job.js';
import {renderNotifications} from './views/services.js';

export function connect() {
  if (S.es) S.es.close();
  const conn = document.getElementById('conn');
  const es = events();
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
  es.addEventListener('promotion', onPromotion);
}

// onPromotion reads the pipelines' stages again after a bundle changed
// state in a stage (the event names nothing: the stages are read as far
// as the caller's scope shows them), at most once a second.
let promotionTimer = null;
function onPromotion() {
  if (promotionTimer) return;
  promotionTimer = setTimeout(() => {
    promotionTimer = null;
    if (S.view && S.view.name === 'pipelines') S.view.refresh();
  }, 1000);
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
  // A job's end may end a promotion's rollout: the stages say so next.
  if (v.name === 'pipelines' && final(u.job.state)) onPromotion();
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
