// state.js: what the page knows between views: the session, the event
// stream, live jobs and logs, and the view shown.

export const S = {
  session: null,        // {instance, role, name, csrf, canAct}
  es: null,             // the EventSource
  jobs: new Map(),      // job id -> latest WatchJobResponse-like {job, workloads}
  logs: new Map(),      // job id -> [{seq, time, stage, text}]
  plans: new Map(),     // job id -> its plan: the one confirmed here, or read with the job
  notifications: [],    // newest first
  timer: null,          // the current view's refresh timer
  view: null,           // {name, arg, refresh()}
};

export function user() { return (S.session && S.session.name) || 'web:' + (S.session ? S.session.instance : ''); }
