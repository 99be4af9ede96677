// format.js: times and job states in words.

export function ago(ts) {
  if (!ts) return '';
  const s = Math.round((Date.now() - Date.parse(ts)) / 1000);
  if (s < 0) return 'in ' + dur(-s);
  return dur(s) + ' ago';
}
export function until(ts) {
  if (!ts) return '';
  const s = Math.round((Date.parse(ts) - Date.now()) / 1000);
  return s <= 0 ? 'now' : 'in ' + dur(s);
}
function dur(s) {
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}
export function when(ts) { return ts ? new Date(ts).toLocaleString() : ''; }
export function clock(ts) { return ts ? new Date(ts).toLocaleTimeString() : ''; }

const stateWords = {JOB_STATE_QUEUED: 'queued', JOB_STATE_RUNNING: 'running', JOB_STATE_SUCCEEDED: 'succeeded', JOB_STATE_FAILED: 'failed', JOB_STATE_CANCELLED: 'cancelled'};
export function stateWord(s) { return stateWords[s] || s; }
export function final(s) { return s === 'JOB_STATE_SUCCEEDED' || s === 'JOB_STATE_FAILED' || s === 'JOB_STATE_CANCELLED'; }
export function stateClass(s) { return {JOB_STATE_SUCCEEDED: 'ok', JOB_STATE_FAILED: 'bad', JOB_STATE_CANCELLED: 'warn'}[s] || 'run'; }
