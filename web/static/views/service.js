// views/service.js: one service: its resources, pods and their logs, its
// manifest against the live object, its images and its history.

import {startRelease} from '../actions.js';
import {api, jobsByCommit} from '../api.js';
import {commitLink, el, errorBox, main, signatureBadge} from '../dom.js';
import {ago, signature, when} from '../format.js';
import {setView} from '../router.js';
import {S} from '../state.js';
import {historyTable} from './history.js';
import {automationCell, policyCell, serviceActions} from './services.js';

export function serviceView(id) {
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

// cosign's own tags beside an image (sha256-HEX.sig, .att, .sbom, and
// the referrers fallback's sha256-HEX): never an image to release, as
// registry.CosignArtifact says on the server, which refuses them.
const cosignTag = /^sha256-[0-9a-f]{64}(\.sig|\.att|\.sbom)?$/;

function imagesTable(c) {
  const passing = new Set(c.passing || []);
  // A Signature column where a verification profile applies to the
  // container's images (fluxd --verify-config, or fluxd.io/verify).
  const signed = (c.available || []).some((im) => signature(im.verification));
  const rows = (c.available || []).map((im) => {
    const marks = [];
    if (im.ref === c.current) marks.push(el('span', {class: 'badge ok'}, 'running'));
    if (im.tag && im.tag === c.best) marks.push(el('span', {class: 'badge run'}, 'newest allowed'));
    const artifact = cosignTag.test(im.tag || '');
    if (artifact) marks.push(el('span', {class: 'badge muted'}, 'cosign artifact'));
    else if (c.filter && c.filter !== '*' && !passing.has(im.tag)) marks.push(el('span', {class: 'badge muted'}, 'filtered out'));
    const act = S.session.canAct && !artifact && im.ref !== c.current && (c.filter === '*' || passing.has(im.tag))
      ? el('button', {type: 'button', 'aria-label': 'Release ' + im.ref, onclick: () => startRelease({services: [S.view.arg], image: im.ref})}, 'Release…') : '';
    const cells = [el('td', {}, el('code', {}, im.tag || im.ref)), el('td', {}, when(im.createdAt))];
    if (signed) cells.push(el('td', {class: 'signature'}, signatureBadge(im.verification) || '–'));
    return el('tr', {'data-tag': im.tag || im.ref}, cells, el('td', {}, marks), el('td', {}, act));
  });
  return el('section', {class: 'card', 'aria-label': 'Images of container ' + c.container},
    el('h3', {}, 'Container ', c.container),
    el('p', {}, 'running ', el('code', {}, c.current), ' · filter ', el('code', {}, c.filter || '*'), ' · ', String(c.total), ' images',
      c.refreshedAt ? ' · read ' + ago(c.refreshedAt) : '', c.refreshing ? ' · refreshing' : ''),
    c.error ? el('p', {class: 'error'}, c.error) : '', c.refreshError ? el('p', {class: 'warn'}, c.refreshError) : '',
    (c.warnings || []).map((w) => el('p', {class: 'warn', role: 'note'}, '⚠ ' + w)),
    el('table', {'aria-label': 'Images of ' + c.container},
      el('thead', {}, el('tr', {}, ['Tag', 'Created', signed ? 'Signature' : null, '', ''].filter((h) => h !== null).map((h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {}, rows)));
}
