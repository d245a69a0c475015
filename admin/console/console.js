// The console's entry point: the token, the hash routes and the views.
//
//   #/                          overview (instances per definition and status)
//   #/instances?status=parked   the list, its filter in the query
//   #/instance/<id>[?retry=N]   one instance (the id percent-encoded)
//   #/queues                    the queues, their limits and counts
//   #/queue/<name>              one queue and its partitions (the name percent-encoded)
//   #/schedules                 the schedules, their state and actions
//
// Routes live in the hash so the service serves a single page. Without a token (none in this
// tab yet, or the service answered 401) the token form replaces the view; the route stays,
// so entering the token opens what was asked for.

import {clearNotice, setupDialog} from './actions.js';
import {api, forgetToken, setToken, token} from './api.js';
import {h} from './dom.js';
import * as instance from './instance.js';
import * as list from './list.js';
import * as overview from './overview.js';
import * as queues from './queues.js';
import * as schedules from './schedules.js';

const main = document.getElementById('main');
const tokenPanel = document.getElementById('token-panel');
const tokenMessage = document.getElementById('token-message');
const tokenInput = document.getElementById('token-input');
const forgetButton = document.getElementById('forget-token');

let dispose = null;  // stops the current view's polling

export function parseRoute(hash) {
    const text = hash.replace(/^#/, '') || '/';
    const q = text.indexOf('?');
    const path = q < 0 ? text : text.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : text.slice(q + 1));
    if (path === '/' || path === '') return {view: 'overview', params};
    if (path === '/instances') return {view: 'list', params};
    if (path === '/queues') return {view: 'queues', params};
    if (path === '/schedules') return {view: 'schedules', params};
    if (path.startsWith('/instance/')) {
        try {
            const id = decodeURIComponent(path.slice('/instance/'.length));
            if (id) return {view: 'instance', id, params};
        } catch (e) {
            // A malformed escape: not a route.
        }
    }
    if (path.startsWith('/queue/')) {
        try {
            const name = decodeURIComponent(path.slice('/queue/'.length));
            if (name) return {view: 'queue', name, params};
        } catch (e) {
            // A malformed escape: not a route.
        }
    }
    return {view: 'missing', path, params};
}

function missing(root, route) {
    root.replaceChildren(
        h('h1', null, 'Not found'),
        h('p', null, 'The console has no page ', h('code', null, route.path), '. ',
          h('a', {href: '#/'}, 'Go to the overview'), '.'));
    return null;
}

const VIEWS = {
    overview: overview.render,
    list: list.render,
    instance: instance.render,
    queues: queues.render,
    queue: queues.renderOne,
    schedules: schedules.render,
    missing
};
const TITLES = {
    overview: 'Overview',
    list: 'Instances',
    instance: 'Instance',
    queues: 'Queues',
    queue: 'Queue',
    schedules: 'Schedules',
    missing: 'Not found'
};

function stopView() {
    if (dispose) dispose();
    dispose = null;
}

function markNavigation(view) {
    for (const [id, active] of [
             ['nav-overview', view === 'overview'], ['nav-instances', view === 'list'],
             ['nav-queues', view === 'queues'], ['nav-schedules', view === 'schedules']]) {
        const link = document.getElementById(id);
        if (active)
            link.setAttribute('aria-current', 'page');
        else
            link.removeAttribute('aria-current');
    }
}

function show() {
    stopView();
    if (!token()) {
        askToken(null);
        return;
    }
    tokenPanel.hidden = true;
    main.hidden = false;
    forgetButton.hidden = false;
    const route = parseRoute(location.hash);
    markNavigation(route.view);
    const subject = route.id || route.name;
    document.title = `${TITLES[route.view]}${subject ? ` ${subject}` : ''} · Keel console`;
    dispose = VIEWS[route.view](main, route) || null;
}

function askToken(message) {
    stopView();
    main.replaceChildren();
    main.hidden = true;
    forgetButton.hidden = true;
    tokenPanel.hidden = false;
    tokenMessage.hidden = !message;
    tokenMessage.textContent = message || '';
    tokenInput.value = '';
    tokenInput.focus();
}

async function onTokenSubmit(event) {
    event.preventDefault();
    const value = tokenInput.value.trim();
    if (!value) return;
    setToken(value);
    try {
        await api.stats();  // a 401 comes back through the `unauthorized` event
    } catch (error) {
        if (error.status !== 401) askToken(`The token could not be checked: ${error.message}`);
        return;
    }
    clearNotice();
    show();
}

function onUnauthorized(event) {
    forgetToken();
    askToken(
        'Token refused: the service answered ' +
        `${event.detail.message}. Enter the token the service was started with ` +
        '(--admin-token or KEEL_ADMIN_TOKEN).');
}

function start() {
    setupDialog();
    document.getElementById('token-form').addEventListener('submit', onTokenSubmit);
    forgetButton.addEventListener('click', () => {
        forgetToken();
        clearNotice();
        askToken('The token was forgotten in this tab.');
    });
    document.querySelector('a.skip').addEventListener('click', (event) => {
        event.preventDefault();  // "#main" is not a route
        (tokenPanel.hidden ? main : tokenInput).focus();
    });
    window.addEventListener('unauthorized', onUnauthorized);
    window.addEventListener('hashchange', () => {
        clearNotice();
        show();
        window.scrollTo(0, 0);
    });
    show();
}

start();
