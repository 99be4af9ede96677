// actions.js: what a deployer does from the page (lock, automate, tag
// filters, release, rollback, sync), each confirmed in a dialog first.

import {api} from './api.js';
import {announce, commitLink, el} from './dom.js';
import {refreshView} from './router.js';
import {S, user} from './state.js';

export async function setLock(id, lock) {
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

export async function setAutomated(id, on) {
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
export async function editFilters(s) {
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
export async function startRollback(id, image) {
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
export async function startRelease(spec, title) {
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
export async function startSync() {
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

export function planTable(plan) {
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

export function tell(title, msg) {
  const d = el('dialog', {'aria-labelledby': 'tell-title', role: 'alertdialog'},
    el('h2', {id: 'tell-title'}, title), el('p', {class: 'error'}, msg),
    el('form', {method: 'dialog'}, el('button', {class: 'primary'}, 'Close')));
  document.body.append(d);
  d.showModal();
  return new Promise((res) => d.addEventListener('close', () => { d.remove(); res(); }, {once: true}));
}
