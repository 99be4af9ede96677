// views/jobs.js: the release jobs, newest first.

import {api} from '../api.js';
import {commitLink, el, errorBox, main, serviceLink} from '../dom.js';
import {final, stateClass, stateWord, when} from '../format.js';
import {setView} from '../router.js';
import {S} from '../state.js';

export function jobsView() {
  const body = el('div', {}, el('p', {class: 'muted'}, 'Loading…'));
  main().replaceChildren(el('h1', {}, 'Jobs'), body);
  setView('jobs', '', async () => {
    try {
      const r = await api('ListJobs', {limit: 30});
      body.replaceChildren(el('table', {id: 'jobs', 'aria-label': 'Jobs'},
        el('caption', {}, 'Release jobs, newest first; they run one at a time'),
        el('thead', {}, el('tr', {}, ['Job', 'State', 'Stage', 'Services', 'Commit', 'Created', 'Error'].map((h) => el('th', {scope: 'col'}, h)))),
        el('tbody', {}, (r.jobs || []).map((j) => {
          const live = S.jobs.get(j.id);
          if (live && !final(j.state)) j = Object.assign({}, j, live.job, {plan: j.plan});
          return el('tr', {'data-job': j.id},
            el('td', {}, el('a', {href: '#/job/' + j.id}, j.id)),
            el('td', {}, el('span', {class: 'badge ' + stateClass(j.state)}, stateWord(j.state)), j.queuePosition ? ' #' + j.queuePosition : ''),
            el('td', {}, j.stage),
            el('td', {}, ((j.plan && j.plan.items) || []).filter((it) => it.action === 'update').map((it) => el('div', {}, serviceLink(it.service)))),
            el('td', {}, commitLink(j.commit)),
            el('td', {}, when(j.createdAt)),
            el('td', {class: 'bad'}, j.error || ''));
        }))));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  }, 0);
}
