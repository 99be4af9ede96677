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

// signature is an image's signature verification in words (the API's
// Verification: outcome, profiles, digest, detail), or null where no
// verification profile applies: text for a badge, its class, and the
// whole detail for its title. The detail reads "profile P: verified by
// SIGNER; profile Q: ..." or "profile P: failed (REASON): why".
export function signature(v) {
  if (!v || !v.outcome || v.outcome === 'not-required') return null;
  const detail = v.detail || '';
  const title = [detail, v.digest ? 'at ' + v.digest : ''].filter(Boolean).join(' ');
  const parts = detail.split('; ');
  switch (v.outcome) {
    case 'verified': {
      const by = parts.map((p) => p.split(': verified by ')[1]).filter(Boolean).map(shortKey);
      return {text: by.length ? 'verified by ' + by.join('; ') : 'verified', cls: 'ok', title};
    }
    case 'unsigned':
      return {text: 'unsigned', cls: 'bad', title};
    case 'failed': {
      // The first profile that failed is the one the verdict stopped at;
      // a detail may hold "; " itself (a missing attestation's does), so
      // it is not split for this.
      const m = /: failed \(([a-z-]+)\): /.exec(detail);
      return {text: 'failed: ' + (m ? m[1] : parts[parts.length - 1]), cls: 'bad', title};
    }
    case 'unchecked':
      return {text: 'not checked yet', cls: 'muted', title: title || 'its digest is not read yet'};
  }
  return {text: v.outcome + (detail ? ': ' + detail : ''), cls: 'warn', title};
}

// shortKey shortens a signer ("key sha256:HEX (/path/to/cosign.pub)")
// to the key ID's first 12 hex digits, as commits are shortened, and the
// key file's name; the title keeps both whole.
function shortKey(signer) {
  return signer.replace(/sha256:([0-9a-f]{12})[0-9a-f]{52}/g, 'sha256:$1…').replace(/\(([^()]*\/)?([^()/]+)\)$/, '($2)');
}
