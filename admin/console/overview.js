// The overview: instances per definition and status from GET /admin/stats, as bars with their
// counts (each count a link to the list with that filter), the parked and failed instances
// first because they need an operator, and "resume every parked instance" per definition;
// then the live workers and the code version of each definition they run (GET
// /admin/workers), which is what to watch while a rolling deploy has versions side by side.
// Refreshed every few seconds; redrawn only when the counts or the workers change.

import {confirmAction} from './actions.js';
import {api} from './api.js';
import {h, listHref, poll, problemElement, s, statusBadge, STATUSES} from './dom.js';

const REFRESH_MS = 5000;

function countLink(definition, status, count) {
    const text = `${count} ${status}`;
    if (!count) return h('span', {class: 'count muted'}, text);
    return h('a', {class: 'count', href: listHref({definition, status})}, text);
}

// One bar per status; the widest is the definition's largest count. The numbers are text
// beside the bars, so the chart reads without colour and without the SVG.
function bars(definition, counts) {
    const max = Math.max(1, ...STATUSES.map((st) => counts[st] || 0));
    const rows = STATUSES.map((status) => {
        const n = counts[status] || 0;
        const width = n ? Math.max(1, Math.round((n / max) * 100)) : 0;
        return h(
            'li', {class: 'bar-row'}, h('span', {class: 'bar-label'}, statusBadge(status)),
            s('svg', {
                class: 'bar-track',
                viewBox: '0 0 100 10',
                preserveAspectRatio: 'none',
                'aria-hidden': 'true',
                focusable: 'false'
            },
              s('rect', {class: `bar-fill fill-${status}`, x: 0, y: 0, width, height: 10})),
            countLink(definition, status, n));
    });
    return h('ul', {class: 'bars', 'aria-label': `${definition}: instances by status`}, rows);
}

function resumeAllButton(definition, parked, refresh) {
    return h(
        'button', {
            type: 'button',
            class: 'secondary',
            on: {
                click: () => confirmAction({
                    title: 'Resume every parked instance',
                    body:
                        h('p', null, `Run all ${parked} parked instances of `,
                          h('code', null, definition),
                          ' again? Do this once the code that parked them is fixed.'),
                    confirm: 'Resume all',
                    run: async () => {
                        const r = await api.resumeParked(definition);
                        const refused = r.refused.map((x) => `${x.id}: ${x.reason}`).join('; ');
                        return `Resumed ${r.resumed.length}` +
                            (r.refused.length ? `; refused ${r.refused.length} (${refused})` : '');
                    },
                    done: refresh,
                }),
            },
        },
        `Resume all ${parked} parked`);
}

function attention(total) {
    const items = ['parked', 'failed'].map(
        (status) =>
            h('li', null,
              total[status] ? h('a', {href: listHref({status})}, `${total[status]} ${status}`) :
                              h('span', {class: 'muted'}, `0 ${status}`)));
    return h(
        'section', {class: 'panel attention', 'aria-labelledby': 'attention-title'},
        h('h2', {id: 'attention-title'}, 'Needs attention'), h('ul', {class: 'inline'}, items),
        h('p', {class: 'hint'}, 'Parked: stopped by a journal mismatch after a code change, ',
          'resumable once the code is fixed. Failed: a step failed for good; retry from a journal ',
          'entry.'));
}

function definitionCard(definition, counts, refresh) {
    const total = STATUSES.reduce((sum, st) => sum + (counts[st] || 0), 0);
    return h(
        'section', {class: 'panel definition'},
        h('h2', null, h('a', {href: listHref({definition})}, definition)),
        h('p', {class: 'muted'}, `${total} instances`), bars(definition, counts),
        counts.parked ? resumeAllButton(definition, counts.parked, refresh) : null);
}

// A row per worker and definition, and a hint naming the definitions that run at more than
// one version (a rolling deploy in progress).
function workersPanel(workers) {
    const rows = [];
    const versions = new Map();
    for (const w of workers) {
        for (const [definition, version] of Object.entries(w.versions).sort()) {
            rows.push(
                h('tr', null, h('td', null, w.worker), h('td', null, definition),
                  h('td', null, version || h('span', {class: 'muted'}, 'none'))));
            if (!versions.has(definition)) versions.set(definition, new Set());
            versions.get(definition).add(version);
        }
    }
    const mixed = [...versions].filter(([, v]) => v.size > 1).map(([d]) => d);
    return h(
        'section', {class: 'panel workers', 'aria-labelledby': 'workers-title'},
        h('h2', {id: 'workers-title'}, `Workers (${workers.length})`),
        mixed.length ? h('p', {class: 'hint'}, `Versions side by side: ${mixed.join(', ')}. `,
                         'Older workers leave the instances that newer code started ',
                         'to the workers running it.') :
                       null,
        rows.length ? h('table', null,
                        h('thead', null,
                          h('tr', null, h('th', null, 'Worker'), h('th', null, 'Definition'),
                            h('th', null, 'Version'))),
                        h('tbody', null, rows)) :
                      h('p', {class: 'muted'}, 'No live workers.'));
}

export function render(main) {
    const content = h('div', {id: 'overview'});
    const problem = h('div');
    main.replaceChildren(h('h1', null, 'Overview'), problem, content);
    let last = '';

    const refresh = async () => {
        let stats;
        let workers;
        try {
            [stats, workers] = await Promise.all([api.stats(), api.workers()]);
        } catch (error) {
            problem.replaceChildren(problemElement(error));
            return;
        }
        problem.replaceChildren();
        workers = workers.workers.map(({worker, versions}) => ({worker, versions}));
        const text = JSON.stringify([stats, workers]);
        if (text === last) return;
        last = text;
        const names = Object.keys(stats.definitions).sort();
        content.replaceChildren(
            attention(stats.total),
            names.length ?
                h('div', {class: 'cards'},
                  names.map((name) => definitionCard(name, stats.definitions[name], refresh))) :
                h('p', null, 'No process instances yet.'),
            workersPanel(workers));
    };
    refresh();
    return poll(refresh, REFRESH_MS);
}
