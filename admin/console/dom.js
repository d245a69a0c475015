// Building the page without markup strings: every text the console shows goes into the DOM
// as a text node (textContent), never through innerHTML, because instance ids, step names,
// payloads and error messages come from outside and may hold anything. Also the formats the
// views share (times, durations, statuses, JSON) and a poller that pauses in hidden tabs.

const SVG_NS = 'http://www.w3.org/2000/svg';

// Appends children: strings and numbers as text, nodes as they are; null, undefined and
// false are skipped, arrays flattened.
function append(node, children) {
    for (const child of children.flat(Infinity)) {
        if (child === null || child === undefined || child === false) continue;
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
}

// Attributes: `class`, `on` ({click: fn}), `dataset`, `htmlFor` (a label's `for`), boolean
// properties (hidden, disabled, checked, selected, required, open) and plain attributes. Never
// `style` (the CSP forbids inline style) and never markup.
function setAttributes(node, attrs) {
    for (const [name, value] of Object.entries(attrs || {})) {
        if (value === null || value === undefined || value === false) continue;
        if (name === 'on') {
            for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
        } else if (name === 'dataset') {
            Object.assign(node.dataset, value);
        } else if (['hidden', 'disabled', 'checked', 'selected', 'required', 'open'].includes(
                       name)) {
            node[name] = Boolean(value);
        } else if (name === 'htmlFor') {
            node.setAttribute('for', String(value));
        } else if (name === 'value' && 'value' in node) {
            node.value = String(value);
        } else {
            node.setAttribute(name, value === true ? '' : String(value));
        }
    }
    return node;
}

// h('a', {href: '#/'}, 'Overview'): an HTML element.
export function h(tag, attrs, ...children) {
    return append(setAttributes(document.createElement(tag), attrs), children);
}

// s('rect', {x: 1, ...}): an SVG element.
export function s(tag, attrs, ...children) {
    return append(setAttributes(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function clear(node) {
    node.replaceChildren();
    return node;
}

// ---- formats ----

const pad = (n, width = 2) => String(n).padStart(width, '0');

// "2026-11-23 10:00:00.123 UTC" (the API's times are UTC; operators compare them with logs).
export function formatTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
        `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.` +
        `${pad(d.getUTCMilliseconds(), 3)} UTC`;
}

// "850 ms", "4.2 s", "3 min 5 s", "2 h 10 min", "3 d 4 h".
export function formatDuration(ms) {
    const abs = Math.abs(ms);
    if (abs < 1000) return `${Math.round(abs)} ms`;
    if (abs < 60_000) return `${(abs / 1000).toFixed(abs < 10_000 ? 1 : 0)} s`;
    const sec = Math.floor(abs / 1000);
    if (sec < 3600) return `${Math.floor(sec / 60)} min ${sec % 60} s`;
    if (sec < 86_400) return `${Math.floor(sec / 3600)} h ${Math.floor((sec % 3600) / 60)} min`;
    return `${Math.floor(sec / 86_400)} d ${Math.floor((sec % 86_400) / 3600)} h`;
}

// "3 min 5 s ago" / "in 2 h 10 min".
export function formatRelative(iso, now = Date.now()) {
    if (!iso) return '';
    const delta = Date.parse(iso) - now;
    if (Number.isNaN(delta)) return '';
    if (Math.abs(delta) < 1000) return 'now';
    return delta < 0 ? `${formatDuration(delta)} ago` : `in ${formatDuration(delta)}`;
}

// <time> with the absolute UTC time as text and the relative one as a tooltip.
export function timeElement(iso) {
    if (!iso) return h('span', {class: 'muted'}, '—');
    return h('time', {datetime: iso, title: formatRelative(iso)}, formatTime(iso));
}

// How long until `iso`, kept current by tickDue(): "in 2 d 23 h", "overdue by 3 s".
export function dueElement(iso) {
    const node = h('span', {class: 'due', dataset: {due: iso}});
    updateDue(node, Date.now());
    return node;
}

function updateDue(node, now) {
    const delta = Date.parse(node.dataset.due) - now;
    node.textContent = Number.isNaN(delta) ? '' :
        delta >= 0                         ? `in ${formatDuration(delta)}` :
                                             `overdue by ${formatDuration(delta)}`;
}

export function tickDue(root) {
    const now = Date.now();
    for (const node of root.querySelectorAll('[data-due]')) updateDue(node, now);
}

export const STATUSES =
    ['running', 'suspended', 'queued', 'parked', 'failed', 'completed', 'cancelled'];
export const FINAL = new Set(['failed', 'completed', 'cancelled']);

// The status as a word with a symbol, coloured by CSS: readable without colour.
const STATUS_SYMBOL = {
    queued: '…',
    running: '▶',
    suspended: '‖',
    parked: '⚠',
    failed: '✖',
    completed: '✔',
    cancelled: '■',
};
export function statusBadge(status) {
    const known = Object.hasOwn(STATUS_SYMBOL, status);
    return h(
        'span', {class: `status status-${known ? status : 'unknown'}`},
        h('span', {'aria-hidden': 'true'}, known ? STATUS_SYMBOL[status] : '?'), ' ',
        String(status));
}

// Pretty JSON in a <pre>; long values fold into <details>.
export function jsonBlock(value, {fold = 400} = {}) {
    const text = value === undefined ? '' : JSON.stringify(value, null, 2);
    if (text.length <= fold) return h('pre', {class: 'json'}, text);
    return h(
        'details', {class: 'json'},
        h('summary', null,
          `${text.slice(0, 60).replace(/\s+/g, ' ')}… (${text.length} characters)`),
        h('pre', {class: 'json'}, text));
}

// The hash route of an instance's page; ids contain '/' and anything else.
export function instanceHref(id, params) {
    const query = params ? `?${new URLSearchParams(params)}` : '';
    return `#/instance/${encodeURIComponent(id)}${query}`;
}

// The hash route of a queue's page.
export function queueHref(name) { return `#/queue/${encodeURIComponent(name)}`; }

export function listHref(params) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {}))
        if (v !== undefined && v !== '') query.set(k, v);
    const text = query.toString();
    return text ? `#/instances?${text}` : '#/instances';
}

// Runs `fn` every `ms` (the first time after `ms`: the view has just loaded) while the tab
// is visible, at once when it becomes visible again, never two at once; returns stop().
export function poll(fn, ms) {
    let timer = null;
    let stopped = false;
    const run = async () => {
        timer = null;
        if (stopped) return;
        if (document.visibilityState === 'visible') {
            try {
                await fn();
            } catch (e) {
                // The view shows its own errors; a failed refresh is tried again.
            }
        }
        if (!stopped) timer = setTimeout(run, ms);
    };
    const onVisible = () => {
        if (document.visibilityState === 'visible' && timer !== null) {
            clearTimeout(timer);
            run();
        }
    };
    document.addEventListener('visibilitychange', onVisible);
    timer = setTimeout(run, ms);
    return () => {
        stopped = true;
        if (timer !== null) clearTimeout(timer);
        document.removeEventListener('visibilitychange', onVisible);
    };
}

// The "Live refresh" checkbox and the time of the last refresh (as on the list):
// {node, live (the checkbox), stamp() (after each refresh)}.
export function liveToolbar() {
    const live = h('input', {type: 'checkbox', id: 'live', checked: true});
    const updated = h('span', {id: 'updated', class: 'muted'});
    const node =
        h('div', {class: 'toolbar'}, h('label', {class: 'check'}, live, ' Live refresh'), updated);
    const stamp = () => {
        updated.textContent = `Updated ${formatTime(new Date().toISOString()).slice(11, 19)} UTC`;
        updated.dataset.at = String(Date.now());
    };
    return {node, live, stamp};
}

// Replaces the children of `parent` (rows, cards) whose item changed (keyed by `key`),
// keeps the others (their focus too), in the order of `items`; `empty` is the node shown
// when there is none.
export function updateKeyed(parent, items, key, make, empty) {
    const existing = new Map();
    for (const node of parent.querySelectorAll(':scope > [data-key]'))
        existing.set(node.dataset.key, node);
    const nodes = items.map((item) => {
        const node = existing.get(key(item));
        const sig = JSON.stringify(item);
        if (node && node.dataset.sig === sig) return node;
        const fresh = make(item);
        fresh.dataset.key = key(item);
        fresh.dataset.sig = sig;
        return fresh;
    });
    if (!nodes.length) {
        parent.replaceChildren(empty);
        return;
    }
    for (const node of [...parent.children])
        if (!nodes.includes(node)) node.remove();
    nodes.forEach((node, i) => {
        if (parent.children[i] !== node) parent.insertBefore(node, parent.children[i] || null);
    });
}

// The problem of a failed call as one line: "409 Conflict: process instance x is final".
export function problemText(error) {
    return error && error.message ? error.message : String(error);
}

export function problemElement(error) {
    return h('p', {class: 'problem', role: 'alert'}, problemText(error));
}
