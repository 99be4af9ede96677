// fluxd's status page, as native ES modules (no bundler): this is the
// entry point. No framework and no inline script (the page's
// Content-Security-Policy forbids both inline code and other origins,
// and allows scripts from 'self'); every text from the API is set as
// text, never as HTML.
//
// Modules: api.js (the JSON API and the event stream), dom.js (building
// elements, links, labels), format.js (times and job states in words),
// state.js (what the page knows), session.js (sign-in), live.js (the live
// events), router.js (the URL's hash to a view), actions.js (what a
// deployer does, confirmed in dialogs), and one file per view in views/.

import {route} from './router.js';
import {boot} from './session.js';

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', boot);
