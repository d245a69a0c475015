// The queues (docs/guide/queues.md): GET /admin/queues lists the queues this worker
// registered, each with its limits and, from the store, the instances admitted (running
// under the queue's limits, not yet final) and waiting; GET /admin/queues/<name> adds the
// partitions (the first 100 by name). Both refresh every few seconds like the list: in
// place, rows that did not change kept as they are, "Live refresh" turns it off.
//
//   #/queues          every queue
//   #/queue/<name>    one queue and its partitions (the name percent-encoded)

import {api} from './api.js';
// clang-format off
import {
    formatDuration, h, listHref, liveToolbar, poll, problemElement, queueHref, updateKeyed,
} from './dom.js';
// clang-format on

const REFRESH_MS = 3000;

// A limit of the API (null: none) as text.
function limit(value) { return value === null || value === undefined ? 'no limit' : String(value); }

// "20 per second", "100 per 5 min 0 s"; no limit when the rate is null.
function rateText(rate, perMs) {
    if (rate === null || rate === undefined) return 'no limit';
    const per = {1000: 'second', 60_000: 'minute', 3_600_000: 'hour'}[perMs] ||
        formatDuration(perMs || 0);
    return `${rate} per ${per}`;
}

// The limits as a short list: one line each, readable at phone width.
function limits(q) {
    return h(
        'ul', {class: 'limits'}, h('li', null, 'at once: ', limit(q.concurrency)),
        h('li', null, 'per partition: ', limit(q.partition_concurrency)),
        h('li', null, 'per worker: ', limit(q.worker_concurrency)),
        h('li', null, 'rate: ', rateText(q.rate, q.per_ms)));
}

function queueRow(q) {
    return h(
        'tr', null, h('th', {scope: 'row'}, h('a', {href: queueHref(q.name)}, q.name)),
        h('td', null, limits(q)), h('td', {class: 'count'}, String(q.admitted)),
        h('td', {class: 'count'}, String(q.waiting)));
}

// #/queues
export function render(main) {
    const bar = liveToolbar();
    const problem = h('div', {id: 'queues-problem'});
    const tbody = h('tbody');
    main.replaceChildren(
        h('h1', null, 'Queues'),
        h('p', {class: 'hint'}, 'Admitted: started under the queue\u2019s limits and not yet ',
          'finished. Waiting: created, not yet admitted (their status is queued).'),
        bar.node, problem,
        h('div', {class: 'table-wrap'},
          h('table', {id: 'queues', class: 'list'},
            h('caption', null, 'Queues this worker registered'),
            h('thead', null,
              h('tr', null,
                ['Queue', 'Limits', 'Admitted', 'Waiting'].map((c) => h('th', {scope: 'col'}, c)))),
            tbody)));

    const load = async () => {
        let answer;
        try {
            answer = await api.queues();
        } catch (error) {
            problem.replaceChildren(problemElement(error));
            return;
        }
        problem.replaceChildren();
        const queues = [...answer.queues].sort((a, b) => (a.name < b.name ? -1 : 1));
        updateKeyed(
            tbody, queues, (q) => q.name, queueRow,
            h('tr', null,
              h('td', {colspan: 4, class: 'empty'},
                'This worker registered no queue (engine::add_queue).')));
        bar.stamp();
    };
    load();
    const stop = poll(() => (bar.live.checked ? load() : null), REFRESH_MS);
    bar.live.addEventListener('change', () => {
        if (bar.live.checked) load();
    });
    return () => stop();
}

function summary(q) {
    const rows = [
        ['Admitted', h('span', {id: 'queue-admitted', class: 'count'}, String(q.admitted))],
        ['Waiting', h('span', {id: 'queue-waiting', class: 'count'}, String(q.waiting))],
        ['At once', h('span', {id: 'queue-concurrency'}, limit(q.concurrency))],
        ['Per partition', h('span', {id: 'queue-partition'}, limit(q.partition_concurrency))],
        ['Per worker', h('span', {id: 'queue-worker'}, limit(q.worker_concurrency))],
        ['Rate', h('span', {id: 'queue-rate'}, rateText(q.rate, q.per_ms))],
    ];
    return h('dl', {class: 'summary'}, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

function partitionRow(p) {
    return h(
        'tr', null,
        h('th', {scope: 'row'},
          p.partition === '' ? h('span', {class: 'muted'}, '(default)') :
                               h('code', null, p.partition)),
        h('td', {class: 'count'}, String(p.waiting)),
        h('td', {class: 'count'}, String(p.admitted)));
}

// #/queue/<name>
export function renderOne(main, route) {
    const name = route.name;
    const bar = liveToolbar();
    const problem = h('div', {id: 'queue-problem'});
    const head = h('div');
    const tbody = h('tbody');
    const more = h('p', {class: 'muted', hidden: true});
    main.replaceChildren(
        h('p', {class: 'crumbs'}, h('a', {href: '#/queues'}, '\u2190 Queues')),
        h('h1', null, h('span', {class: 'muted'}, 'Queue '), h('code', {id: 'queue-name'}, name)),
        bar.node, problem, head,
        h('section', {class: 'panel', 'aria-labelledby': 'partitions-title'},
          h('h2', {id: 'partitions-title'}, 'Partitions'),
          h('p', {class: 'hint'}, 'Partitions take turns; a partition at its limit waits ',
            'without holding up the others. The default partition is the one of starts that ',
            'name none.'),
          h('div', {class: 'table-wrap'},
            h('table', {id: 'partitions'},
              h('thead', null,
                h('tr', null,
                  ['Partition', 'Waiting', 'Admitted'].map((c) => h('th', {scope: 'col'}, c)))),
              tbody)),
          more));
    let last = '';

    const load = async () => {
        let q;
        try {
            q = await api.queue(name);
        } catch (error) {
            problem.replaceChildren(problemElement(error));
            return;
        }
        problem.replaceChildren();
        const text = JSON.stringify(q);
        if (text !== last) {
            last = text;
            const listed = q.waiting ?
                h('p', {id: 'queue-listed'}, `${q.waiting} waiting: see `,
                  h('a', {href: listHref({status: 'queued'})}, 'the queued instances'),
                  ' (of every queue).') :
                null;
            head.replaceChildren(
                h('section', {class: 'panel', 'aria-labelledby': 'queue-summary-title'},
                  h('h2', {id: 'queue-summary-title'}, 'Summary'), summary(q), listed));
            updateKeyed(
                tbody, q.partitions || [], (p) => p.partition, partitionRow,
                h('tr', null,
                  h('td', {colspan: 3, class: 'empty'},
                    'No partition has an instance waiting or admitted.')));
            more.hidden = !q.more_partitions;
            more.textContent = `The first ${(q.partitions || []).length} partitions by name.`;
        }
        bar.stamp();
    };
    load();
    const stop = poll(() => (bar.live.checked ? load() : null), REFRESH_MS);
    bar.live.addEventListener('change', () => {
        if (bar.live.checked) load();
    });
    return () => stop();
}
