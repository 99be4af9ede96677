// views/job.js: one job: its state, plan, rollout progress and log.

import {planTable, tell} from '../actions.js';
import {api} from '../api.js';
import {announce, commitLink, el, errorBox, main, serviceLink} from '../dom.js';
import {clock, final, stateClass, stateWord, when} from '../format.js';
import {setView} from '../router.js';
import {S} from '../state.js';

export function jobView(id) {
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

export function renderJobHead(u) {
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

export function appendLog(l) {
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
