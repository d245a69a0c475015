// One instance: GET /admin/instances/<id> and its journal (GET /admin/journal/<id>, or with
// ?retry=N the journal kept by that retry). Shows its parameters, status, result or error,
// what it waits for (signals; timers with the time left), its signals (awaited, in the
// inbox, received), its lease and steps in flight, the instances of the same entity, the
// journal as a timeline and as a table, and the actions: cancel, resume, retry from an
// entry, send a signal, each confirmed first. Polled while open; redrawn only when the
// instance changed, keeping the focus on the same control.

import {confirmAction, field, notify} from './actions.js';
import {api, journalEntries, nanosToMillis} from './api.js';
// clang-format off
import {
    dueElement, FINAL, formatDuration, formatTime, h, instanceHref, jsonBlock, listHref, poll,
    problemElement, queueHref, statusBadge, tickDue, timeElement,
} from './dom.js';
// clang-format on
import {buildModel, timeline} from './timeline.js';

const REFRESH_MS = 2000;

// ---- actions ----

function cancelAction(inst, reload) {
    confirmAction({
        title: 'Cancel instance',
        body:
            h('p', null, 'Cancel ', h('code', null, inst.id), '? It stops for good: no step runs ',
              'again, timers and waits are dropped. It can be retried from a journal entry later.'),
        confirm: 'Cancel instance',
        run: async () => {
            const r = await api.cancel(inst.id);
            return `Cancelled ${r.id}: ${r.status}`;
        },
        done: reload,
    });
}

function resumeAction(inst, reload) {
    confirmAction({
        title: 'Resume instance',
        body: [
            h('p', null, 'Run the parked instance ', h('code', null, inst.id), ' again?'),
            h('p', {class: 'hint'}, 'It was parked by: ', inst.reason || 'a journal mismatch',
              '. Resume once the code that parked it is fixed, or it parks again.')
        ],
        confirm: 'Resume',
        run: async () => {
            const r = await api.resume(inst.id);
            return `Resumed ${r.id}: ${r.status}`;
        },
        done: reload,
    });
}

function retryAction(inst, from, reload) {
    const input =
        h('input',
          {type: 'number', min: 0, step: 1, value: from, required: true, inputmode: 'numeric'});
    confirmAction({
        title: 'Retry from a journal entry',
        body: [
            h('p', null, 'Retry ', h('code', null, inst.id), ': keep journal entries 0 to N−1, ',
              'replay them and continue live from entry N. Steps after N run again, signals they ',
              'had consumed are delivered again, timers start anew. The current journal is kept ',
              'for audit.'),
            field('From entry N', input, `0 to ${inst.journal_length}`)
        ],
        confirm: 'Retry',
        run: async () => {
            const n = Number(input.value);
            if (!Number.isInteger(n) || n < 0)
                throw new Error('The entry must be a whole number, 0 or more.');
            const r = await api.retry(inst.id, n);
            return `Retrying ${r.id} from entry ${r.from}: ${r.status}`;
        },
        done: reload,
    });
}

function signalAction(inst, path, reload) {
    const listId = 'signal-paths';
    const pathInput = h('input', {
        type: 'text',
        value: path || '',
        required: true,
        list: listId,
        spellcheck: 'false',
        autocomplete: 'off',
        placeholder: '/payment/o-17/received'
    });
    const payloadInput = h('textarea', {rows: 5, spellcheck: 'false'}, '{}');
    const keyInput = h('input', {type: 'text', spellcheck: 'false', autocomplete: 'off'});
    confirmAction({
        title: 'Send a signal',
        body: [
            h('p', null, 'Deliver a signal to the inbox of ', h('code', null, inst.id), '.'),
            field('Path', pathInput, 'The signal path the instance waits for or will wait for.'),
            h('datalist', {id: listId},
              (inst.waits || []).map((w) => h('option', {value: w.path}))),
            field('Payload (JSON)', payloadInput, 'Empty for none.'),
            field(
                'Idempotency key', keyInput,
                'Optional: a second signal with the same key is a duplicate.')
        ],
        confirm: 'Send signal',
        run: async () => {
            const signal = {path: pathInput.value.trim()};
            if (!signal.path.startsWith('/')) throw new Error('The path must start with "/".');
            const text = payloadInput.value.trim();
            if (text) {
                try {
                    signal.payload = JSON.parse(text);
                } catch (e) {
                    throw new Error(`The payload is not JSON: ${e.message}`);
                }
            }
            if (keyInput.value.trim()) signal.key = keyInput.value.trim();
            const r = await api.signal(inst.id, signal);
            return `Signal ${signal.path} ${
                       r.outcome === 'duplicate' ? 'was a duplicate' : 'stored'}` +
                `${r.waiting ? '; the instance was waiting for it' : ''}`;
        },
        done: reload,
    });
}

function actionBar(inst, reload, viewingRetry) {
    const final = FINAL.has(inst.status);
    const parked = inst.status === 'parked';
    const button = (id, label, enabled, why, onClick, cls = 'secondary') =>
        h('button', {
            type: 'button',
            id,
            class: cls,
            disabled: !enabled || viewingRetry,
            title: enabled ? null : why,
            dataset: {focus: id},
            on: {click: onClick}
        },
          label);
    return h(
        'div', {class: 'actions', role: 'toolbar', 'aria-label': 'Actions'},
        button(
            'action-resume', 'Resume', parked, 'Only a parked instance can be resumed.',
            () => resumeAction(inst, reload), parked ? 'primary' : 'secondary'),
        button(
            'action-retry', 'Retry from…', final || parked,
            'Only a finished or parked instance can be retried.',
            () => retryAction(inst, 0, reload)),
        button(
            'action-signal', 'Send signal…', !final, 'A finished instance takes no signals.',
            () => signalAction(inst, (inst.waits || [])[0]?.path, reload)),
        button(
            'action-cancel', 'Cancel', !final, 'The instance is already finished.',
            () => cancelAction(inst, reload), 'danger'));
}

// ---- sections ----

function section(title, id, ...content) {
    return h('section', {class: 'panel', 'aria-labelledby': id}, h('h2', {id}, title), content);
}

function entityPrefix(id) {
    const cut = id.lastIndexOf('/');
    return cut > 0 ? id.slice(0, cut + 1) : '';
}

function summary(inst) {
    const rows = [
        ['Status', h('span', {id: 'instance-status'}, statusBadge(inst.status))],
        ['Definition', h('a', {href: listHref({definition: inst.definition})}, inst.definition)],
        ...(inst.version ? [['Version', inst.version]] : []),
        ...(inst.queue ?
                [['Queue', h('a', {id: 'instance-queue', href: queueHref(inst.queue)},
                             inst.queue)]] :
                []),
        ...(inst.parent ?
                [['Parent', h('a', {id: 'instance-parent', href: instanceHref(inst.parent)},
                              inst.parent)]] :
                []),
        ['Parameters', jsonBlock(inst.params)],
        ['Created', timeElement(inst.created)],
        ['Changed', timeElement(inst.changed)],
        ['Journal', `${inst.journal_length} entries`],
    ];
    if (inst.reason)
        rows.push(
            ['Parked by', h('p', {id: 'instance-reason', class: 'problem-text'}, inst.reason)]);
    if (inst.error)
        rows.push(['Error', h('p', {id: 'instance-error', class: 'problem-text'}, inst.error)]);
    if (inst.left)
        rows.push([
            'Left by',
            h('p', {id: 'instance-left'},
              `worker ${inst.left.worker} (version ${inst.left.version || 'none'}) `,
              timeElement(inst.left.at), `: ${inst.left.reason}`),
        ]);
    if (inst.result !== null && inst.result !== undefined)
        rows.push(['Result', jsonBlock(inst.result)]);
    rows.push([
        'Lease',
        inst.lease ?
            h('span', null, `worker ${inst.lease.worker}, epoch ${inst.lease.epoch}, expires `,
              timeElement(inst.lease.expires), ' (', dueElement(inst.lease.expires), ')') :
            h('span', {class: 'muted'}, 'none (no worker holds it)')
    ]);
    return h('dl', {class: 'summary'}, rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

function waitingFor(inst, reload) {
    const waits = inst.waits || [];
    const timers = inst.timers || [];
    if (!waits.length && !timers.length) return null;
    return section(
        'Waiting for', 'waiting-title',
        h('ul', {class: 'plain'},
          waits.map(
              (w) =>
                  h('li', null, 'signal ', h('code', null, w.path), ` (operation #${w.seq}) `,
                    h('button', {
                        type: 'button',
                        class: 'small secondary',
                        dataset: {focus: `send-${w.seq}`},
                        on: {click: () => signalAction(inst, w.path, reload)}
                    },
                      'Send…'))),
          timers.map(
              (t) =>
                  h('li', null, `timer "${t.name}" (operation #${t.seq}) due `, timeElement(t.due),
                    ', ', dueElement(t.due)))));
}

// What the handler published (ctx.publish): its progress, as the flow states it.
function published(inst) {
    const values = Object.entries(inst.published || {});
    if (!values.length) return null;
    return section(
        'Published', 'published-title',
        h('dl', {class: 'summary', id: 'instance-published'},
          values.map(([name, value]) => [h('dt', null, name), h('dd', null, jsonBlock(value))])));
}

// The child processes it started (ctx.start), each linking to its own page.
function children(inst) {
    const kids = inst.children || [];
    if (!kids.length) return null;
    const more = (inst.children_total || 0) > kids.length ?
        h('p', {class: 'muted'}, `The first ${kids.length} of ${inst.children_total}.`) :
        null;
    return section(
        'Children', 'children-title',
        h('div', {class: 'table-wrap'},
          h('table', {id: 'instance-children'},
            h('thead', null,
              h('tr', null,
                ['Instance', 'Definition', 'Status', 'When the parent ends', 'Changed'].map(
                    (c) => h('th', {scope: 'col'}, c)))),
            h('tbody', null,
              kids.map(
                  (c) => h(
                      'tr', null, h('td', null, h('a', {href: instanceHref(c.id)}, c.id)),
                      h('td', null, c.definition), h('td', null, statusBadge(c.status)),
                      h('td', null, c.on_parent_close === 'abandon' ? 'lives on' : 'cancelled'),
                      h('td', null, timeElement(c.changed))))))),
        more);
}

function stepsInFlight(inst) {
    const steps = inst.steps || [];
    if (!steps.length) return null;
    return section(
        'Steps in flight', 'steps-title',
        h('div', {class: 'table-wrap'},
          h('table', null,
            h('thead', null,
              h('tr', null,
                ['Operation', 'Step', 'Attempt', 'Last error'].map(
                    (c) => h('th', {scope: 'col'}, c)))),
            h('tbody', null,
              steps.map(
                  (st) => h(
                      'tr', null, h('td', null, `#${st.seq}`), h('td', null, st.name),
                      h('td', null, String(st.attempt)), h('td', null, st.last_error || '—')))))));
}

// Every signal of the instance: awaited now, waiting in its inbox, received (journal).
function signals(inst, entries, reload) {
    const rows = [];
    for (const w of inst.waits || []) rows.push({path: w.path, state: 'awaited', at: null});
    for (const m of inst.inbox || []) {
        rows.push({path: m.path, state: 'in inbox', at: m.at, key: m.key, payload: m.payload});
    }
    for (const e of entries) {
        if (e.kind !== 'signal') continue;
        rows.push({
            path: e.name,
            state: `received (entry ${e.position})`,
            at: e.at,
            payload: e.value && e.value.payload,
            position: e.position
        });
    }
    const body = rows.length ?
        h(
            'div', {class: 'table-wrap'},
            h('table', {id: 'signals'},
              h('thead', null,
                h('tr', null,
                  ['Path', 'State', 'At', 'Key', 'Payload',
                   ''].map((c) => h('th', {scope: 'col'}, c)))),
              h('tbody', null,
                rows.map(
                    (r, i) =>
                        h('tr', null, h('td', null, h('code', null, r.path)),
                          h('td', null,
                            r.position !== undefined ?
                                h('button', {
                                    type: 'button',
                                    class: 'link',
                                    dataset: {focus: `jump-${r.position}`},
                                    on: {click: jumpToEntry(r.position)}
                                },
                                  r.state) :
                                r.state),
                          h('td', null, r.at ? timeElement(r.at) : '—'),
                          h('td', null, r.key ? h('code', null, r.key) : '—'),
                          h('td', null,
                            r.payload === undefined ? '—' : jsonBlock(r.payload, {fold: 120})),
                          h('td', null,
                            FINAL.has(inst.status) ?
                                null :
                                h('button', {
                                    type: 'button',
                                    class: 'small secondary',
                                    dataset: {focus: `signal-row-${i}`},
                                    on: {click: () => signalAction(inst, r.path, reload)}
                                },
                                  'Send…'))))))) :
        h('p', {class: 'muted'}, 'No signals awaited, waiting or received.');
    const count = (inst.inbox || []).length;
    return section(`Signals (inbox: ${count})`, 'signals-title', body);
}

// A button, not a #fragment link: the hash is the console's route.
function jumpToEntry(position) {
    return () => {
        const row = document.getElementById(`entry-${position}`);
        if (row) {
            row.scrollIntoView({block: 'center'});
            row.focus();
        }
    };
}

function related(inst, others) {
    const prefix = entityPrefix(inst.id);
    if (!prefix) return null;
    const list = others.filter((o) => o.id !== inst.id);
    return section(
        'Instances of the same entity', 'related-title',
        h('p', null, 'Ids starting with ', h('code', null, prefix), ': ',
          h('a', {href: listHref({prefix})}, 'list them all')),
        list.length ? h('ul', {class: 'plain'},
                        list.map(
                            (o) =>
                                h('li', null, h('a', {href: instanceHref(o.id)}, o.id), ' ',
                                  statusBadge(o.status)))) :
                      h('p', {class: 'muted'}, 'No other instance.'));
}

function retries(inst, viewing) {
    const list = inst.retries || [];
    if (!list.length) return null;
    return section(
        'Retries', 'retries-title',
        h('ol', {class: 'plain'},
          list.map(
              (r, i) => h(
                  'li', null, `Retry ${i + 1}, from entry ${r.from}, `, timeElement(r.at),
                  `: the journal had ${r.journal_length} entries. `,
                  Number(viewing) === i + 1 ?
                      h('strong', null, 'shown on this page') :
                      h('a', {href: instanceHref(inst.id, {retry: i + 1})}, 'See that journal')))));
}

function journalTable(inst, entries, total, model, reload, canRetry) {
    const start = model.start;
    let previous = start;
    const rows = entries.map((e) => {
        const at = e.at ? Date.parse(e.at) : previous;
        const took = at - previous;
        previous = Math.max(previous, at);
        const notes = [];
        if (e.failed) notes.push(h('strong', {class: 'failed-text'}, 'FAILED'));
        if (e.attempts > 1) notes.push(`${e.attempts} attempts`);
        if (e.kind === 'run' && e.started && e.started !== e.at) {
            const ran = at - Date.parse(e.started);
            if (Number.isFinite(ran)) notes.push(`ran ${formatDuration(ran)}`);
        }
        const won = model.winners.get(e.position);
        if (won) notes.push(`won ${won.kind} #${won.seq}`);
        if (e.kind === 'race' || e.kind === 'any')
            notes.push(`winner: arm ${JSON.stringify(e.value)}`);
        if (e.kind === 'now' || e.kind === 'timer') {
            const ms = nanosToMillis(e.value);
            if (Number.isFinite(ms)) {
                notes.push(`${e.kind === 'timer' ? 'was due' : 'the time'} ${
                    formatTime(new Date(ms).toISOString())}`);
            }
        }
        return h(
            'tr', {id: `entry-${e.position}`, tabindex: -1}, h('td', null, String(e.position)),
            h('td', null, `#${e.seq}`), h('td', null, e.kind),
            h('td', null, e.name ? h('code', null, e.name) : '—'),
            h('td', null, timeElement(e.at), h('br'),
              h('span', {class: 'muted'}, `+${formatDuration(at - start)}`)),
            h('td', null, formatDuration(took)), h('td', null, jsonBlock(e.value, {fold: 160})),
            h('td', null, notes.length ? notes.map((n, i) => [i ? '; ' : '', n]) : ''),
            h('td', null,
              canRetry ? h('button', {
                  type: 'button',
                  class: 'small secondary',
                  dataset: {focus: `retry-${e.position}`},
                  on: {click: () => retryAction(inst, e.position, reload)}
              },
                           'Retry from here') :
                         null));
    });
    return h(
        'div', {class: 'table-wrap'},
        h('table', {id: 'journal', class: 'journal'},
          h('caption', null,
            entries.length < total ? `Journal: the first ${entries.length} of ${total} entries` :
                                     `Journal: ${total} entries`),
          h('thead', null,
            h('tr', null,
              [
                  '#', 'Operation', 'Kind', 'Name', 'Committed', 'Since previous', 'Value', 'Notes',
                  ''
              ].map((c) => h('th', {scope: 'col'}, c)))),
          h('tbody', null,
            rows.length ?
                rows :
                h('tr', null, h('td', {colspan: 9, class: 'empty'}, 'The journal is empty.')))));
}

// ---- the page ----

function page(state, reload, width) {
    const {inst, entries, total, others, retry} = state;
    const viewingRetry = Boolean(retry);
    const model = buildModel(inst, entries, {historical: viewingRetry});
    const canRetry = !viewingRetry && (FINAL.has(inst.status) || inst.status === 'parked');
    return [
        h('p', {class: 'crumbs'},
          h('a', {href: listHref({definition: inst.definition})}, `← ${inst.definition}`)),
        h('h1', {class: 'instance-title'}, h('span', {class: 'muted'}, 'Instance '),
          h('code', {id: 'instance-id'}, inst.id), ' ', statusBadge(inst.status)),
        actionBar(inst, reload, viewingRetry),
        section('Summary', 'summary-title', summary(inst)),
        published(inst),
        children(inst),
        waitingFor(inst, reload),
        stepsInFlight(inst),
        section(
            viewingRetry ? `Timeline before retry ${retry}` : 'Timeline', 'timeline-title',
            viewingRetry ?
                h('p', {class: 'notice-inline'}, `The journal as it was before retry ${retry}. `,
                  h('a', {href: instanceHref(inst.id)}, 'Show the current journal')) :
                null,
            timeline(inst, entries, {width, historical: viewingRetry})),
        signals(inst, entries, reload),
        related(inst, others),
        retries(inst, retry),
        section(
            viewingRetry ? `Journal before retry ${retry}` : 'Journal', 'journal-title',
            journalTable(inst, entries, total, model, reload, canRetry)),
    ];
}

export function render(main, route) {
    const id = route.id;
    const retry = route.params.get('retry') || '';
    let state = null;
    let signature = '';
    let drawnWidth = 0;
    main.replaceChildren(
        h('h1', null, 'Instance ', h('code', null, id)), h('p', {class: 'muted'}, 'Loading…'));

    const width = () => Math.max(300, Math.min(1400, main.clientWidth - 40));

    const draw = () => {
        const focused = document.activeElement && main.contains(document.activeElement) ?
            document.activeElement.dataset.focus :
            null;
        drawnWidth = width();
        main.replaceChildren(...page(state, () => load(true), drawnWidth).filter(Boolean));
        if (focused) {
            const again = main.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
            if (again) again.focus();
        }
    };

    const load = async (force) => {
        let inst;
        try {
            inst = await api.instance(id);
        } catch (error) {
            if (!state || error.status === 404) {
                main.replaceChildren(
                    h('h1', null, 'Instance ', h('code', null, id)), problemElement(error));
                state = null;
                signature = '';
            } else if (error.status !== 401) {
                notify(`Could not refresh: ${error.message}. Showing what was last read.`, 'error');
            }
            return;
        }
        const sig = JSON.stringify(inst);
        if (!force && sig === signature && state) return;
        let journal;
        let others = [];
        try {
            journal = await journalEntries(id, {retry: retry || undefined});
        } catch (error) {
            main.replaceChildren(
                h('h1', null, 'Instance ', h('code', null, id)), problemElement(error));
            return;
        }
        const prefix = entityPrefix(id);
        if (prefix) {
            try {
                others = (await api.list({prefix, limit: 20})).instances;
            } catch (e) {
                others = [];
            }
        }
        signature = sig;
        state = {inst, entries: journal.entries, total: journal.total, others, retry};
        draw();
    };

    load(true);
    const stop = poll(() => load(false), REFRESH_MS);
    const ticker = setInterval(() => tickDue(main), 1000);
    const onResize = () => {
        if (state && Math.abs(width() - drawnWidth) > 40) draw();
    };
    window.addEventListener('resize', onResize);
    return () => {
        stop();
        clearInterval(ticker);
        window.removeEventListener('resize', onResize);
    };
}
