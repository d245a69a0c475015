// The admin API (docs/admin-api.md) as the console calls it: the same JSON routes the `keel`
// CLI uses, with `Authorization: Bearer <token>` on every request. The token lives in this
// tab's sessionStorage, never in a cookie, so no other site can make the browser send it
// (there is nothing to forge a request with). A 401 announces itself with an
// `unauthorized` event on window, so the page can ask for the token again.

const TOKEN_KEY = 'keel.admin.token';

// The API lies next to the console: /admin/console/ -> /admin/ (also behind a path prefix).
const base = new URL('../', document.baseURI);

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

export function setToken(value) { sessionStorage.setItem(TOKEN_KEY, value); }

export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

// A refused or failed call: `status` is 0 when the service could not be reached. The
// message is what the console shows: "409 Conflict: process instance x is final".
export class ApiError extends Error {
    constructor(status, title, detail, field) {
        const head = status ? `${status} ${title}` : title;
        super(detail ? `${head}: ${detail}` : head);
        this.status = status;
        this.title = title;
        this.detail = detail;
        this.field = field;
    }
}

// Ids contain '/', which stays a separator; every other reserved character is encoded.
export function idPath(id) { return String(id).split('/').map(encodeURIComponent).join('/'); }

async function problemOf(res) {
    let body = null;
    try {
        body = await res.json();
    } catch (e) {
        // Not JSON: the status line says enough.
    }
    const title = (body && body.title) || res.statusText || 'Error';
    const detail = body && body.detail;
    return new ApiError(res.status, title, detail, body && body.field);
}

async function call(method, path, body) {
    const headers = {Accept: 'application/json', Authorization: `Bearer ${token()}`};
    const init = {method, headers, cache: 'no-store', credentials: 'omit'};
    if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
    }
    let res;
    try {
        res = await fetch(new URL(path, base), init);
    } catch (e) {
        throw new ApiError(0, 'Cannot reach the service', e.message);
    }
    if (!res.ok) {
        const error = await problemOf(res);
        if (res.status === 401)
            window.dispatchEvent(new CustomEvent('unauthorized', {detail: error}));
        throw error;
    }
    return JSON.parse(await res.text(), exact);
}

// Journaled values hold 64-bit integers (random(), now() in nanoseconds) that a JavaScript
// number would round: where the browser can (JSON.parse source text, JSON.rawJSON), they
// are kept as their source text, which JSON.stringify writes back unchanged.
function exact(key, value, context) {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && context &&
        /^-?[0-9]+$/.test(context.source) && typeof JSON.rawJSON === 'function') {
        return JSON.rawJSON(context.source);
    }
    return value;
}

// Nanoseconds since the epoch (a timer's due time or now() in the journal) as milliseconds.
export function nanosToMillis(value) {
    if (typeof value === 'number') return value / 1e6;
    try {
        return Number(BigInt(JSON.stringify(value)) / 1000000n);
    } catch (e) {
        return NaN;
    }
}

function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
        if (v !== undefined && v !== null && v !== '') q.set(k, v);
    }
    const text = q.toString();
    return text ? `?${text}` : '';
}

export const api = {
    stats: () => call('GET', 'stats'),
    workers: () => call('GET', 'workers'),
    // {definition, status, prefix, since, until, limit, cursor}
    list: (params) => call('GET', `instances${query(params)}`),
    instance: (id) => call('GET', `instances/${idPath(id)}`),
    journal: (id, params) => call('GET', `journal/${idPath(id)}${query(params)}`),
    cancel: (id) => call('POST', `cancel/${idPath(id)}`, {}),
    resume: (id) => call('POST', `resume/${idPath(id)}`, {}),
    resumeParked: (definition) => call('POST', 'resume-parked', {definition}),
    retry: (id, from) => call('POST', `retry/${idPath(id)}`, {from}),
    signal: (id, signal) => call('POST', `signal/${idPath(id)}`, signal),
    queues: () => call('GET', 'queues'),
    // {top}: how many partitions (by name)
    queue: (name, params) => call('GET', `queues/${encodeURIComponent(name)}${query(params)}`),
    schedules: () => call('GET', 'schedules'),
    // pause, resume, trigger or delete; backfill with {from, to} (RFC 3339)
    scheduleAction: (name, action, body = {}) =>
        call('POST', `schedules/${encodeURIComponent(name)}/${action}`, body),
};

// Up to `limit` instances from `cursor` on. The API may answer a filtered page short (even
// empty) with `next` set; this goes on, a bounded number of calls, until the page is full.
export async function listPage(params, limit) {
    const instances = [];
    let cursor = params.cursor;
    let next = null;
    for (let calls = 0; calls < 10; ++calls) {
        const page = await api.list({...params, cursor, limit: limit - instances.length});
        instances.push(...page.instances);
        next = page.next;
        if (!next || instances.length >= limit) break;
        cursor = next;
    }
    return {instances, next};
}

// The whole journal (or, with `retry`, the one kept by that retry), up to `max` entries.
export async function journalEntries(id, {retry, max = 5000} = {}) {
    const entries = [];
    let offset = 0;
    let total = 0;
    while (entries.length < max) {
        const page =
            await api.journal(id, {offset, limit: Math.min(1000, max - entries.length), retry});
        entries.push(...page.entries);
        total = page.total;
        if (page.next === null || page.next === undefined) break;
        offset = page.next;
    }
    return {entries, total};
}
