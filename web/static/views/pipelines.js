// views/pipelines.js: the promotion pipelines, each drawn as a graph of
// its stages (left to right, an arrow from each stage's 'from'), with
// each stage's bundle, state, gates and what waits; and what a deployer
// does there (promote, approve, resume), the plan shown first.

import {planTable, tell} from '../actions.js';
import {api} from '../api.js';
import {announce, el, errorBox, main, serviceLink} from '../dom.js';
import {ago, until} from '../format.js';
import {setView} from '../router.js';
import {S, user} from '../state.js';

export function pipelinesView() {
  const body = el('div', {id: 'pipelines'}, el('p', {class: 'muted'}, 'Loading…'));
  main().replaceChildren(el('h1', {}, 'Pipelines'), body);
  setView('pipelines', '', async () => {
    let ps;
    try {
      ps = (await api('ListPipelines', {})).pipelines || [];
    } catch (e) {
      return body.replaceChildren(errorBox(e));
    }
    if (!ps.length) {
      return body.replaceChildren(el('p', {class: 'muted', id: 'no-pipelines'},
        'No pipeline you may see: fluxd reads Pipeline objects (kind: Pipeline, apiVersion: fluxd.io/v1) under its --git-path, and shows a stage only to callers whose scope holds all of its services. docs/promotion.md sets one up.'));
    }
    const sections = await Promise.all(ps.map(pipelineSection));
    // A stage's services opened stay open when the view is read again.
    const open = new Set(Array.from(body.querySelectorAll('details.stage-services[open]')).map((d) => d.dataset.key));
    // So does the keyboard's focus, on the same button of the same stage.
    const a = document.activeElement;
    const focused = a && body.contains(a) && a.tagName === 'BUTTON' ? a.getAttribute('aria-label') : null;
    body.replaceChildren(...sections);
    for (const d of body.querySelectorAll('details.stage-services')) if (open.has(d.dataset.key)) d.open = true;
    if (focused) {
      const b = Array.from(body.querySelectorAll('button')).find((x) => x.getAttribute('aria-label') === focused);
      if (b) b.focus();
    }
    for (const g of body.querySelectorAll('.stage-graph')) drawArrows(g);
  }, 15000);
}

// pipelineID is how the API names a pipeline: NAMESPACE/NAME.
const pipelineID = (p) => (p.namespace ? p.namespace + '/' : '') + p.name;

async function pipelineSection(p) {
  const id = pipelineID(p);
  const head = el('h2', {}, p.name, ' ', el('span', {class: 'muted'}, p.namespace ? 'in ' + p.namespace : '', p.file ? ' · ' : '', p.file ? el('code', {}, p.file + ':' + p.line) : ''));
  let stages;
  try {
    stages = (await api('ListStages', {pipeline: id})).stages || [];
  } catch (e) {
    return el('section', {class: 'pipeline card', 'data-pipeline': id}, head, errorBox(e));
  }
  return el('section', {class: 'pipeline card', 'data-pipeline': id, 'aria-label': 'Pipeline ' + id}, head, stageGraph(id, stages));
}

// stageGraph lays the stages out in columns by their distance from the
// first (a stage is one column right of its 'from'); the arrows are drawn
// once the boxes are placed (drawArrows).
function stageGraph(pid, stages) {
  const byName = new Map(stages.map((s) => [s.name, s]));
  const depth = new Map();
  const depthOf = (s, seen) => {
    if (depth.has(s.name)) return depth.get(s.name);
    const f = s.from && byName.get(s.from);
    // A from-stage out of the caller's sight, or a loop (git refuses
    // those): the stage starts a column of its own.
    const d = f && !seen.has(f.name) ? depthOf(f, new Set(seen).add(s.name)) + 1 : 0;
    depth.set(s.name, d);
    return d;
  };
  const rows = new Map();
  const graph = el('div', {class: 'stage-graph', role: 'list', 'aria-label': 'Stages of ' + pid, 'data-pipeline': pid});
  graph.append(svgEl('svg', {class: 'stage-arrows', 'aria-hidden': 'true', focusable: 'false'}));
  for (const s of stages) {
    const d = depthOf(s, new Set([s.name]));
    const r = (rows.get(d) || 0) + 1;
    rows.set(d, r);
    const box = stageBox(pid, s);
    // CSSOM, not a style attribute: the page's CSP allows no inline style.
    box.style.gridColumn = String(d + 1);
    box.style.gridRow = String(r);
    graph.append(box);
  }
  return graph;
}

const stateClasses = {verified: 'ok', promoted: 'run', verifying: 'run', soaking: 'run', 'awaiting approval': 'warn', failed: 'bad', superseded: 'muted'};
const stateClass = (st) => stateClasses[st] || 'muted';
const short = (id) => (id || '').slice(0, 12);

function stageBox(pid, s) {
  const c = s.current;
  const status = c ? c.status : 'no bundle yet';
  const lines = [];
  if (c) {
    lines.push(el('p', {class: 'stage-bundle'}, 'bundle ', el('code', {title: c.bundle}, short(c.bundle)), ' ',
      el('span', {class: 'badge ' + stateClass(c.status), 'data-state': c.status}, c.status)));
    if (c.reason) lines.push(el('p', {class: c.status === 'failed' ? 'bad' : 'muted'}, c.reason));
    if (c.promotedBy) lines.push(el('p', {class: 'muted'}, 'promoted by ', c.promotedBy, c.since ? ' ' + ago(c.since) : ''));
  } else {
    lines.push(el('p', {class: 'muted stage-bundle'}, 'No bundle yet: one forms when its services have rolled out.'));
  }
  const gates = [];
  if (s.checks) gates.push('checks ' + (s.checksPassed || 0) + '/' + s.checks);
  const soak = Number(s.soakLeftMs || 0);
  if (soak > 0) gates.push('soak ' + (c && c.soakUntil ? 'ends ' + until(c.soakUntil) : Math.ceil(soak / 1000) + ' s left'));
  if (s.approvals) {
    const w = (s.waiting || []).find((x) => x.status === 'awaiting approval');
    gates.push('approvals ' + (w ? (w.approvers || []).length : 0) + '/' + s.approvals);
  }
  if (gates.length) lines.push(el('p', {class: 'stage-gates'}, gates.join(' · ')));
  if (s.paused) {
    lines.push(el('p', {class: 'warn stage-paused', role: 'note'}, 'Paused', s.paused.by ? ' by ' + s.paused.by : '', s.paused.since ? ' ' + ago(s.paused.since) : '',
      s.paused.reason ? ': ' + s.paused.reason : '', ' — automatic promotion into it waits until resumed.'));
  }
  if (s.locked) lines.push(el('p', {class: 'warn stage-locked', role: 'note'}, 'Locked: ', s.locked));
  if (s.hold) lines.push(el('p', {class: 'muted stage-hold'}, 'Held: ', s.hold));
  const waiting = s.waiting || [];
  if (waiting.length) {
    lines.push(el('div', {class: 'stage-waiting'}, el('strong', {}, 'Waiting'),
      el('ul', {class: 'plain'}, waiting.map((w) => el('li', {'data-bundle': w.bundle},
        el('code', {title: w.bundle}, short(w.bundle)), ' ', el('span', {class: 'badge ' + stateClass(w.status)}, w.status),
        w.status === 'awaiting approval' ? ' ' + (w.approvers || []).length + '/' + (s.approvals || 1) + ((w.approvers || []).length ? ' (' + w.approvers.join(', ') + ')' : '') : '',
        S.session.canAct && w.status === 'awaiting approval'
          ? [' ', el('button', {type: 'button', class: 'approve', 'aria-label': 'Approve bundle ' + short(w.bundle) + ' into ' + s.name, onclick: () => startApprove(pid, s, w.bundle)}, 'Approve…')] : '')))));
  }
  const acts = S.session.canAct
    ? el('div', {class: 'actions'},
      s.from ? el('button', {type: 'button', class: 'promote', 'aria-label': 'Promote a bundle into ' + s.name, onclick: () => startPromote(pid, s)}, 'Promote…') : '',
      s.paused ? el('button', {type: 'button', class: 'resume', 'aria-label': 'Resume automatic promotion into ' + s.name, onclick: () => startResume(pid, s)}, 'Resume…') : '')
    : el('p', {class: 'muted view-only'}, 'view only: promoting, approving and resuming need the deployer role');
  return el('article', {class: 'stage state-' + stateClass(status), role: 'listitem', 'data-stage': s.name, 'data-from': s.from || '', 'aria-labelledby': 'stage-' + cssID(pid + '-' + s.name)},
    el('h3', {id: 'stage-' + cssID(pid + '-' + s.name)}, s.name, s.from ? el('span', {class: 'muted stage-from'}, ' from ' + s.from) : ''),
    lines,
    el('details', {class: 'stage-services', 'data-key': pid + ' ' + s.name}, el('summary', {}, (s.services || []).length + ' service' + ((s.services || []).length === 1 ? '' : 's')),
      el('ul', {class: 'plain'}, (s.services || []).map((id) => el('li', {}, serviceLink(id))))),
    acts);
}

// cssID makes a name safe in an id attribute (names come from git).
const cssID = (s) => s.replace(/[^A-Za-z0-9_-]/g, '_');

const svgNS = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// drawArrows draws an arrow from each stage's from-stage to it, from the
// boxes' places in the graph; again when the graph's size changes.
function drawArrows(graph) {
  const draw = () => {
    const svg = graph.querySelector('svg.stage-arrows');
    if (!svg || !graph.isConnected) return;
    const g0 = graph.getBoundingClientRect();
    svg.setAttribute('width', String(graph.scrollWidth));
    svg.setAttribute('height', String(graph.scrollHeight));
    const mid = 'arrowhead-' + cssID(graph.dataset.pipeline || '');
    const marker = svgEl('marker', {id: mid, viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '8', markerHeight: '8', orient: 'auto-start-reverse'});
    marker.append(svgEl('path', {d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead'}));
    const defs = svgEl('defs');
    defs.append(marker);
    const paths = [];
    const boxes = new Map(Array.from(graph.querySelectorAll('.stage')).map((b) => [b.dataset.stage, b]));
    for (const b of boxes.values()) {
      const f = boxes.get(b.dataset.from);
      if (!f) continue;
      const a = f.getBoundingClientRect(), z = b.getBoundingClientRect();
      // From beside the one box's title to beside the other's: boxes
      // of one row then have a straight arrow whatever their heights.
      const x1 = a.right - g0.left, y1 = a.top + Math.min(a.height / 2, 28) - g0.top;
      const x2 = z.left - g0.left, y2 = z.top + Math.min(z.height / 2, 28) - g0.top;
      const mx = (x1 + x2) / 2;
      paths.push(svgEl('path', {d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: 'arrow', 'marker-end': 'url(#' + mid + ')', 'data-from': b.dataset.from, 'data-to': b.dataset.stage}));
    }
    svg.replaceChildren(defs, ...paths);
  };
  requestAnimationFrame(draw);
  if (window.ResizeObserver && !graph.dataset.observed) {
    graph.dataset.observed = '1';
    new ResizeObserver(() => requestAnimationFrame(draw)).observe(graph);
  }
}

// planFirst shows the plan of a promotion (a dry run: fluxd changes
// nothing) in a dialog with what confirming does, and resolves to the
// plan when confirmed, else null. A plan fluxd cannot make is shown as
// its error; allowWithout lets the action go on anyway (an approval or a
// resume need no plan of their own).
async function planFirst({title, intro, req, confirm, id, allowWithout}) {
  let plan = null, err = null;
  try {
    plan = (await api('Promote', Object.assign({kind: 'RELEASE_KIND_PLAN', user: user()}, req))).plan || {};
  } catch (e) {
    err = e;
  }
  if (err && !allowWithout) {
    await tell('Could not plan the promotion', err.message);
    return null;
  }
  const d = el('dialog', {'aria-labelledby': id + '-title', id: id + '-dialog', class: 'promotion-dialog'},
    el('h2', {id: id + '-title'}, title),
    intro.map((t) => el('p', {}, t)),
    err ? el('p', {class: 'warn', role: 'note'}, 'No plan: ', err.message) : [
      planTable(plan),
      el('p', {class: 'muted'}, 'Plan checksum ', el('code', {id: id + '-checksum'}, plan.checksum || ''), ' at revision ', el('code', {}, (plan.revision || '').slice(0, 12)))],
    el('form', {method: 'dialog', class: 'actions'},
      el('button', {value: 'ok', class: 'primary', id: 'confirm-' + id}, confirm),
      el('button', {value: 'cancel', id: 'cancel-' + id}, 'Cancel')));
  document.body.append(d);
  d.showModal();
  const answer = await new Promise((res) => d.addEventListener('close', () => res(d.returnValue), {once: true}));
  d.remove();
  return answer === 'ok' ? (plan || {}) : null;
}

// startPromote picks a bundle (of those the stage's from-stage verified,
// or any by hand), shows its plan, and promotes it once confirmed with
// the plan's checksum: if anything changed meanwhile fluxd refuses.
async function startPromote(pid, s) {
  let bundles;
  try {
    bundles = (await api('ListBundles', {pipeline: pid})).bundles || [];
  } catch (e) {
    return tell('Could not read the bundles of ' + pid, e.message);
  }
  const rec = (b, st) => (b.records || []).find((r) => r.stage === st);
  const choices = bundles.filter((b) => !(s.current && s.current.bundle === b.id));
  if (!choices.length) return tell('Promote into ' + s.name, 'No bundle to promote: ' + s.name + ' runs the only one.');
  const verified = (b) => { const r = rec(b, s.from); return r && r.status === 'verified'; };
  const first = choices.find(verified) || choices[0];
  const d = el('dialog', {'aria-labelledby': 'pick-title', id: 'pick-dialog'},
    el('form', {method: 'dialog'},
      el('h2', {id: 'pick-title'}, 'Promote into ' + s.name + ': which bundle?'),
      el('p', {class: 'muted'}, 'Newest first. A bundle not verified in ' + s.from + ' is refused; promoting anything but the newest verified one pauses automatic promotion into ' + s.name + '.'),
      el('fieldset', {class: 'bundles'}, el('legend', {class: 'sr-only'}, 'Bundles'),
        choices.map((b) => {
          const r = rec(b, s.from);
          const rid = 'bundle-' + cssID(b.id);
          return el('div', {class: 'bundle-choice'},
            el('input', {type: 'radio', name: 'bundle', id: rid, value: b.id, checked: b === first}),
            el('label', {for: rid}, el('code', {}, short(b.id)), ' ',
              r ? el('span', {class: 'badge ' + stateClass(r.status)}, s.from + ': ' + r.status) : el('span', {class: 'badge muted'}, 'not in ' + s.from), ' ',
              (b.images || []).map((im) => el('span', {class: 'muted'}, im.repository + ':' + im.tag + ' ')),
              b.created ? el('span', {class: 'muted'}, '· ' + ago(b.created)) : ''));
        })),
      el('p', {class: 'actions'}, el('button', {value: 'ok', class: 'primary', id: 'pick-bundle'}, 'Show the plan'), el('button', {value: 'cancel', formnovalidate: true}, 'Cancel'))));
  document.body.append(d);
  d.showModal();
  const answer = await new Promise((res) => d.addEventListener('close', () => res(d.returnValue), {once: true}));
  const picked = d.querySelector('input[name=bundle]:checked');
  const bundle = picked ? picked.value : '';
  d.remove();
  if (answer !== 'ok' || !bundle) return;
  const req = {pipeline: pid, stage: s.name, bundle};
  const plan = await planFirst({title: 'Promote bundle ' + short(bundle) + ' into ' + s.name, id: 'promote', req,
    intro: ['One commit, through the same checked path as a release; confirmed with the plan\'s checksum.'], confirm: 'Confirm: promote'});
  if (!plan) return;
  try {
    const r = await api('Promote', Object.assign({kind: 'RELEASE_KIND_EXECUTE', checksum: plan.checksum, user: user()}, req));
    announce('Promotion of ' + short(bundle) + ' into ' + s.name + ' queued');
    if (r.jobId) {
      S.plans.set(r.jobId, plan);
      location.hash = '#/job/' + r.jobId;
    }
  } catch (e) {
    tell('The promotion was refused', e.message);
  }
}

// startApprove shows what the bundle's promotion would change, then
// approves it: once the stage has its approvals, fluxd promotes it.
async function startApprove(pid, s, bundle) {
  const ok = await planFirst({title: 'Approve bundle ' + short(bundle) + ' into ' + s.name, id: 'approve', req: {pipeline: pid, stage: s.name, bundle},
    intro: ['Your approval is recorded under your token\'s name; the same person approving twice counts once. ' + s.name + ' asks for ' + (s.approvals || 1) + ' approval(s); with them, fluxd promotes the bundle into it by itself. This is what that promotion would change:'],
    confirm: 'Confirm: approve', allowWithout: true});
  if (!ok) return;
  try {
    const r = await api('Approve', {pipeline: pid, stage: s.name, bundle});
    const n = ((r.record && r.record.approvers) || []).length;
    announce('Approved ' + short(bundle) + ' into ' + s.name + ' as ' + r.approver + ': ' + n + ' of ' + r.approvals);
  } catch (e) {
    await tell('The approval was refused', e.message);
  }
  if (S.view && S.view.name === 'pipelines') S.view.refresh();
}

// startResume ends a pause: fluxd then promotes the newest bundle
// verified in the from-stage by itself (if the stage is automatic), so
// that promotion's plan is shown first.
async function startResume(pid, s) {
  const ok = await planFirst({title: 'Resume automatic promotion into ' + s.name, id: 'resume', req: {pipeline: pid, stage: s.name},
    intro: ['Paused' + (s.paused.by ? ' by ' + s.paused.by : '') + (s.paused.reason ? ': ' + s.paused.reason : '') + '.',
      'Once resumed, fluxd may promote the newest bundle verified in ' + (s.from || 'the stage before') + ' by itself, as the stage\'s gates allow: this is what it would change now.'],
    confirm: 'Confirm: resume', allowWithout: true});
  if (!ok) return;
  try {
    await api('ResumeStage', {pipeline: pid, stage: s.name});
    announce('Automatic promotion into ' + s.name + ' resumed');
  } catch (e) {
    await tell('Could not resume ' + s.name, e.message);
  }
  if (S.view && S.view.name === 'pipelines') S.view.refresh();
}
