// The schedules (docs/guide/schedules.md): GET /admin/schedules, each with what its process
// published of itself (its plan, paused or not, the next and the last tick, the tick's
// instance running or buffered, the counts of ticks) and the actions: pause or resume,
// trigger a tick now, backfill a range of ticks, delete; each confirmed first, a refusal
// shown in the dialog (actions.js). A schedule is a process instance
// ("keel/schedule/<name>"), linked to its page; so is the instance of its last tick, whose
// status is the schedule's last result. Refreshed every few seconds; a card is redrawn only
// when its schedule changed, keeping the focus on the same control.

import {confirmAction, field} from './actions.js';
import {api} from './api.js';
// clang-format off
import {
    dueElement, h, instanceHref, jsonBlock, liveToolbar, poll, problemElement, statusBadge,
    tickDue, timeElement, updateKeyed,
} from './dom.js';
// clang-format on

const REFRESH_MS = 3000;
const COUNTS = ['started', 'skipped', 'missed', 'cancelled', 'backfilled'];
const COUNT_HINTS = {
    started: 'instances started by ticks and triggers',
    skipped: 'ticks not started: the overlap policy, or their instance existed',
    missed: 'ticks older than the catch-up window after downtime',
    cancelled: 'running instances cancelled by a later tick (cancel_previous)',
    backfilled: 'ticks of backfilled ranges, started or found to have run',
};

// The schedule's own process (process::schedule_instance_id).
export function scheduleInstanceId(name) { return `keel/schedule/${name}`; }

// "20261129T020000Z": the tick as its instance gets it (process::tick_text), UTC, to the second.
function tickText(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return null;
    const pad = (n) => String(n).padStart(2, '0');
    return `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}T` +
        `${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}Z`;
}

// The id of the instance a tick started: the definition's path with its parameters (the
// schedule's, then the tick) in place of the ":name" segments, as the schedule makes it.
function tickInstanceId(s, tickIso) {
    const tick = tickText(tickIso);
    if (!tick || typeof s.definition !== 'string') return null;
    const params = [...(Array.isArray(s.params) ? s.params : []), tick];
    let next = 0;
    const segments = s.definition.split('/').slice(1).map((segment) => {
        if (!segment.startsWith(':')) return segment;
        const value = params[next++];
        return typeof value === 'string' ? value : JSON.stringify(value);
    });
    return next === params.length ? segments.join('/') : null;
}

// "1 h", "30 min", "0 s": a window or a jitter in milliseconds.
function span(ms) {
    if (!ms) return 'none';
    if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
    if (ms % 60_000 === 0) return `${ms / 60_000} min`;
    return `${ms / 1000} s`;
}

// ---- actions ----

function actionBody(text, s, hint) {
    return [
        h('p', null, text, ' ', h('code', null, s.name), '?'),
        hint ? h('p', {class: 'hint'}, hint) : null,
    ];
}

function pauseAction(s, reload) {
    confirmAction({
        title: 'Pause schedule',
        body: actionBody(
            'Pause the schedule', s,
            'No tick starts while it is paused; the ticks of the pause are not caught up on ' +
                'resume (backfill them if they are needed). Triggering still starts a tick.'),
        confirm: 'Pause',
        run: async () => {
            await api.scheduleAction(s.name, 'pause');
            return `Paused ${s.name}.`;
        },
        done: reload,
    });
}

function resumeAction(s, reload) {
    confirmAction({
        title: 'Resume schedule',
        body: actionBody(
            'Resume the schedule', s,
            'Its next tick on the calendar starts; the ticks of ' +
                'the pause do not.'),
        confirm: 'Resume',
        run: async () => {
            await api.scheduleAction(s.name, 'resume');
            return `Resumed ${s.name}.`;
        },
        done: reload,
    });
}

function triggerAction(s, reload) {
    confirmAction({
        title: 'Trigger a tick now',
        body: actionBody(
            'Start a tick of', s,
            `Its overlap policy (${s.overlap || 'skip'}) applies as to any tick: while the ` +
                'previous tick\u2019s instance runs, "skip" counts it as skipped.'),
        confirm: 'Trigger now',
        run: async () => {
            await api.scheduleAction(s.name, 'trigger');
            return `Triggered ${s.name}: a tick starts now.`;
        },
        done: reload,
    });
}

// RFC 3339 to the second, UTC: "2026-11-30T07:00:00Z".
function rfc3339(ms) { return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z'); }

function backfillAction(s, reload) {
    const now = Date.now();
    const input = (value) => h('input', {
        type: 'text',
        value,
        required: true,
        spellcheck: 'false',
        autocomplete: 'off',
        placeholder: '2026-11-01T00:00:00Z'
    });
    const from = input(rfc3339(now - 86_400_000));
    const to = input(rfc3339(now));
    confirmAction({
        title: 'Backfill ticks',
        body: [
            h('p', null, 'Start the ticks of ', h('code', null, s.name), ' from ',
              h('code', null, s.cron),
              ` (${s.zone || 'UTC'}) between these two times that did not run. Each starts `,
              'detached (the overlap policy does not apply); a tick whose instance exists is ',
              'not run again. At most 1,000 ticks.'),
            field('From', from, 'RFC 3339, e.g. 2026-11-01T00:00:00Z (included).'),
            field('To', to, 'RFC 3339 (included), not before From.'),
        ],
        confirm: 'Backfill',
        run: async () => {
            const range = {from: from.value.trim(), to: to.value.trim()};
            await api.scheduleAction(s.name, 'backfill', range);
            return `Backfilling ${s.name} from ${range.from} to ${range.to}: the ticks that did ` +
                'not run start now (see "backfilled").';
        },
        done: reload,
    });
}

function deleteAction(s, reload) {
    confirmAction({
        title: 'Delete schedule',
        body: actionBody(
            'Delete the schedule', s,
            'Its process is cancelled: no tick starts any more. The instances its ticks ' +
                'started run on. It is listed as deleted until its retention ends.'),
        confirm: 'Delete schedule',
        run: async () => {
            await api.scheduleAction(s.name, 'delete');
            return `Deleted ${s.name}.`;
        },
        done: reload,
    });
}

function actionBar(s, reload) {
    const key = s.name;
    // Pause and Resume share a place (and the focus) in the bar.
    const button = (action, label, onClick, cls = 'secondary') =>
        h('button', {
            type: 'button',
            class: cls,
            disabled: s.deleted,
            title: s.deleted ? 'The schedule was deleted.' : null,
            dataset: {focus: `${action === 'resume' ? 'pause' : action}:${key}`, action},
            on: {click: () => onClick(s, reload)}
        },
          label);
    return h(
        'div', {class: 'actions', role: 'toolbar', 'aria-label': `Actions on ${s.name}`},
        s.paused ? button('resume', 'Resume', resumeAction, 'primary') :
                   button('pause', 'Pause', pauseAction),
        button('trigger', 'Trigger now', triggerAction),
        button('backfill', 'Backfill\u2026', backfillAction),
        button('delete', 'Delete', deleteAction, 'danger'));
}

// ---- a schedule ----

function state(s) {
    if (s.deleted)
        return h(
            'span', {class: 'status status-cancelled', dataset: {state: 'deleted'}},
            h('span', {'aria-hidden': 'true'}, '\u25a0'), ' deleted');
    if (s.paused)
        return h(
            'span', {class: 'status status-suspended', dataset: {state: 'paused'}},
            h('span', {'aria-hidden': 'true'}, '\u2016'), ' paused');
    return h(
        'span', {class: 'status status-running', dataset: {state: 'active'}},
        h('span', {'aria-hidden': 'true'}, '\u25b6'), ' active');
}

// The last tick's instance: its link and its status (the schedule's last result).
function lastResult(s, last) {
    if (!last) return h('span', {class: 'muted'}, 'no tick started yet');
    const link = h('a', {href: instanceHref(last.id), dataset: {role: 'last-instance'}}, last.id);
    if (last.error)
        return h('span', null, link, ' ', h('span', {class: 'muted'}, `(${last.error})`));
    const outcome = [];
    if (last.instance.error)
        outcome.push(h('p', {class: 'problem-text'}, last.instance.error));
    else if (last.instance.result !== null && last.instance.result !== undefined)
        outcome.push(jsonBlock(last.instance.result, {fold: 160}));
    return h('div', null, link, ' ', statusBadge(last.instance.status), outcome);
}

function counts(s) {
    return h(
        'ul', {class: 'counts'},
        COUNTS.map(
            (name) =>
                h('li', {dataset: {count: name}, title: COUNT_HINTS[name]},
                  h('span', {class: 'count'}, String(s[name] ?? 0)), ` ${name}`)));
}

function card(s, last, reload) {
    const id = s.instance ?? scheduleInstanceId(s.name);
    const when = (iso) => (iso ? timeElement(iso) : h('span', {class: 'muted'}, 'none'));
    const rows = [
        ['Process', h('a', {href: instanceHref(id), dataset: {role: 'process'}}, id)],
        [
            'Plan',
            h('span', {dataset: {role: 'plan'}}, h('code', null, s.cron || '?'), ' in ',
              s.zone || 'UTC')
        ],
        [
            'Starts',
            h('span', null, h('code', null, s.definition || '?'),
              s.params && s.params.length ? [' with ', h('code', null, JSON.stringify(s.params))] :
                                            null)
        ],
        [
            'Policy',
            `overlap ${s.overlap || 'skip'}; catch-up window ${span(s.catch_up_ms)}` +
                `${s.latest_only ? ' (the latest tick only)' : ''}; jitter ${span(s.jitter_ms)}`
        ],
        [
            'Next tick',
            s.next ? h('span', {dataset: {role: 'next'}}, timeElement(s.next), ' (',
                       dueElement(s.next), ')') :
                     h('span', {class: 'muted', dataset: {role: 'next'}},
                       s.deleted    ? 'none (deleted)' :
                           s.paused ? 'none (paused)' :
                                      'none')
        ],
        ['Last tick', h('span', {dataset: {role: 'last-tick'}}, when(s.last_tick))],
        [
            'Running',
            s.running ?
                h('a', {href: instanceHref(s.running), dataset: {role: 'running'}}, s.running) :
                h('span', {class: 'muted', dataset: {role: 'running'}}, 'none')
        ],
        ['Buffered', h('span', {dataset: {role: 'buffered'}}, when(s.buffered))],
        ['Ticks', counts(s)],
        ['Last result', h('div', {dataset: {role: 'last-result'}}, lastResult(s, last))],
    ];
    const titleId = `schedule-title-${encodeURIComponent(s.name)}`;
    return h(
        'section',
        {class: 'panel schedule', 'aria-labelledby': titleId, dataset: {schedule: s.name}},
        h('h2', {id: titleId}, h('code', null, s.name), ' ', state(s)), actionBar(s, reload),
        h('dl', {class: 'summary'}, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])));
}

// The instance of each schedule's last tick (null when none started yet), read with the
// schedules: {id, instance} or {id, error} when it cannot be read (gone after its retention).
async function lastInstances(schedules) {
    return Promise.all(schedules.map(async (s) => {
        // (A schedule published by a Keel before last_instance: its id is derived.)
        const id = s.last_instance ?? (s.last_tick ? tickInstanceId(s, s.last_tick) : null);
        if (!id) return null;
        try {
            const inst = await api.instance(id);
            return {id, instance: {status: inst.status, result: inst.result, error: inst.error}};
        } catch (error) {
            if (error.status === 401) throw error;
            return {id, error: error.status === 404 ? 'no longer stored' : error.message};
        }
    }));
}

// #/schedules
export function render(main) {
    const bar = liveToolbar();
    const problem = h('div', {id: 'schedules-problem'});
    const list = h('div', {id: 'schedules', class: 'schedules'});
    main.replaceChildren(
        h('h1', null, 'Schedules'),
        h('p', {class: 'hint'}, 'Each schedule is a process that starts an instance of its ',
          'definition at every tick of its calendar. Times are UTC; the calendar\u2019s zone ',
          'decides when the ticks fall.'),
        bar.node, problem, list);

    const load = async () => {
        let answer;
        let lasts;
        try {
            answer = await api.schedules();
            lasts = await lastInstances(answer.schedules);
        } catch (error) {
            problem.replaceChildren(problemElement(error));
            return;
        }
        problem.replaceChildren();
        const focused = document.activeElement && list.contains(document.activeElement) ?
            document.activeElement.dataset.focus :
            null;
        const items = answer.schedules.map((s, i) => ({s, last: lasts[i]}));
        // A card per schedule, in the API's order (by name); redrawn when it changed.
        updateKeyed(
            list, items, (item) => item.s.name, (item) => card(item.s, item.last, refresh),
            h('p', {class: 'muted'}, 'No schedules (engine::schedule declares them).'));
        if (focused && !list.contains(document.activeElement)) {
            const again = list.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
            if (again) again.focus();
        }
        bar.stamp();
    };
    // After an action: at once, and again shortly, as the schedule's process takes the
    // control signal when it wakes up (a moment after the API accepted it).
    let again = null;
    const refresh = () => {
        load();
        clearTimeout(again);
        again = setTimeout(load, 700);
    };
    load();
    const stop = poll(() => (bar.live.checked ? load() : null), REFRESH_MS);
    const ticker = setInterval(() => tickDue(main), 1000);
    bar.live.addEventListener('change', () => {
        if (bar.live.checked) load();
    });
    return () => {
        stop();
        clearTimeout(again);
        clearInterval(ticker);
    };
}
