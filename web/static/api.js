// api.js: fluxd's JSON API (fetch, JSON, the CSRF header) and its event
// stream (server-sent events).

import {S} from './state.js';

export async function http(method, path, body) {
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
export function api(method, req) {
  return http('POST', '/api/fluxd.v1.FluxService/' + method, req || {});
}

// jobsByCommit maps each job's commit to the job, so that a history row
// (which knows its commit) links to the job that made it.
export async function jobsByCommit() {
  const m = new Map();
  try {
    const r = await api('ListJobs', {limit: 200});
    for (const j of r.jobs || []) if (j.commit) m.set(j.commit, j.id);
  } catch (_) { /* the history still shows, without job links */ }
  return m;
}

// events opens fluxd's event stream (server-sent events): jobs, their log
// lines, image pushes and automator passes, for this session.
export function events() { return new EventSource('/api/events'); }
