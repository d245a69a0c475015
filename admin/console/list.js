// The instance list: GET /admin/instances with the filter in the URL's hash (definition,
// status, id prefix, created since / until), newest first, a page at a time (the API's
// cursors; "Newer" walks back the cursors this tab followed). Live refresh polls the same
// page and updates the rows in place, so the filter, the scroll position and the focus stay
// where they are.

import {api, listPage} from './api.js';
// clang-format off
import {
    formatTime, h, instanceHref, listHref, poll, problemElement, statusBadge, STATUSES, timeElement,
} from './dom.js';
// clang-format on

const REFRESH_MS = 3000;
const PAGE_SIZES = [25, 50, 100, 200];
const FILTERS = ['definition', 'status', 'prefix', 'since', 'until'];

// The cursors followed to reach the current page, for "Newer" (per filter, in memory).
const trail = {
    key: '',
    cursors: []
};

function filterOf(params) {
    const filter = {};
    for (const name of FILTERS) filter[name] = params.get(name) || '';
    const limit = Number(params.get('limit'));
    filter.limit = PAGE_SIZES.includes(limit) ? limit : PAGE_SIZES[0];
    return filter;
}

function select(id, label, options, value) {
    const node =
        h('select', {id, name: id},
          options.map(([v, text]) => h('option', {value: v, selected: v === value}, text)));
    return h('div', {class: 'field'}, h('label', {htmlFor: id}, label), node);
}

function input(id, label, value, placeholder) {
    return h('div', {class: 'field'}, h('label', {htmlFor: id}, label), h('input', {
                 id,
                 name: id,
                 type: 'text',
                 value,
                 placeholder,
                 spellcheck: 'false',
                 autocomplete: 'off'
             }));
}

function filterForm(filter) {
    const defs = filter.definition ? [filter.definition] : [];
    const form = h(
        'form', {id: 'filter', class: 'filter', role: 'search'},
        select(
            'filter-definition', 'Definition', [['', 'any'], ...defs.map((d) => [d, d])],
            filter.definition),
        select(
            'filter-status', 'Status', [['', 'any'], ...STATUSES.map((st) => [st, st])],
            filter.status),
        input('filter-prefix', 'Id starts with', filter.prefix, 'order/o-17'),
        input('filter-since', 'Created since', filter.since, '15m, 2h, 3d or 2026-11-23T10:00:00Z'),
        input('filter-until', 'Created before', filter.until, 'same forms'),
        select(
            'filter-limit', 'Per page', PAGE_SIZES.map((n) => [String(n), String(n)]),
            String(filter.limit)),
        h('div', {class: 'buttons'}, h('button', {type: 'submit'}, 'Apply'),
          h('a', {class: 'button secondary', href: '#/instances'}, 'Clear')));
    form.addEventListener('submit', (event) => {
        event.preventDefault();
        const value = (name) => form.elements[`filter-${name}`].value.trim();
        const next = {};
        for (const name of FILTERS) next[name] = value(name);
        next.limit = value('limit') === String(PAGE_SIZES[0]) ? '' : value('limit');
        const href = listHref(next);
        if (location.hash === href)
            window.dispatchEvent(new HashChangeEvent('hashchange'));
        else
            location.hash = href;
    });
    return form;
}

function row(instance) {
    return h(
        'tr', {dataset: {id: instance.id, sig: JSON.stringify(instance)}},
        h('th', {scope: 'row'}, h('a', {href: instanceHref(instance.id)}, instance.id)),
        h('td', null,
          h('a', {href: listHref({definition: instance.definition}), class: 'quiet'},
            instance.definition)),
        h('td', null, statusBadge(instance.status)), h('td', null, timeElement(instance.created)),
        h('td', null, timeElement(instance.changed)));
}

// Keeps rows whose instance did not change (the same nodes: focus and selection stay) and
// moves nodes only where the order changed.
function updateRows(tbody, instances) {
    const existing = new Map();
    for (const tr of tbody.querySelectorAll('tr[data-id]')) existing.set(tr.dataset.id, tr);
    const rows = instances.map((inst) => {
        const tr = existing.get(inst.id);
        return tr && tr.dataset.sig === JSON.stringify(inst) ? tr : row(inst);
    });
    if (!rows.length) {
        tbody.replaceChildren(h(
            'tr', null, h('td', {colspan: 5, class: 'empty'}, 'No instances match this filter.')));
        return;
    }
    for (const tr of [...tbody.children])
        if (!rows.includes(tr)) tr.remove();
    rows.forEach((tr, i) => {
        if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
}

function pageLinks(filter, cursor, next, key) {
    const go = (c) => {
        location.hash = listHref(
            {...filter, limit: filter.limit === PAGE_SIZES[0] ? '' : filter.limit, cursor: c});
    };
    const atStart = !cursor;
    const back = trail.key === key && trail.cursors.length > 0;
    return h(
        'nav', {class: 'pager', 'aria-label': 'Pages'},
        h('button', {
            type: 'button',
            id: 'page-first',
            class: 'secondary',
            disabled: atStart,
            on: {
                click: () => {
                    trail.cursors = [];
                    go('');
                }
            }
        },
          'First page'),
        h('button', {
            type: 'button',
            id: 'page-newer',
            class: 'secondary',
            disabled: atStart || !back,
            on: {click: () => go(trail.cursors.pop() || '')}
        },
          '← Newer'),
        h('button', {
            type: 'button',
            id: 'page-older',
            class: 'secondary',
            disabled: !next,
            on: {
                click: () => {
                    trail.cursors.push(cursor || '');
                    go(next);
                }
            }
        },
          'Older →'));
}

export function render(main, route) {
    const filter = filterOf(route.params);
    const cursor = route.params.get('cursor') || '';
    const key = JSON.stringify(filter);
    if (trail.key !== key) {
        trail.key = key;
        trail.cursors = [];
    }

    const formSlot = h('div', null, filterForm(filter));
    const problem = h('div', {id: 'list-problem'});
    const tbody = h('tbody');
    const table =
        h('table', {id: 'instances', class: 'list'}, h('caption', null, 'Instances, newest first'),
          h('thead', null,
            h('tr', null,
              ['Instance', 'Definition', 'Status', 'Created', 'Changed'].map(
                  (c) => h('th', {scope: 'col'}, c)))),
          tbody);
    const pager = h('div');
    const live = h('input', {type: 'checkbox', id: 'live', checked: true});
    const updated = h('span', {id: 'updated', class: 'muted'});
    main.replaceChildren(
        h('h1', null, 'Instances'), formSlot,
        h('div', {class: 'toolbar'}, h('label', {class: 'check'}, live, ' Live refresh'), updated),
        problem, h('div', {class: 'table-wrap'}, table), pager);

    // The definitions for the filter come from the stats: added to the select when they
    // arrive, leaving whatever the operator has typed or chosen meanwhile as it is.
    api.stats()
        .then((stats) => {
            const choice = formSlot.querySelector('#filter-definition');
            const have = new Set([...choice.options].map((o) => o.value));
            for (const name of Object.keys(stats.definitions).sort()) {
                if (!have.has(name)) choice.append(h('option', {value: name}, name));
            }
        })
        .catch(() => {});

    const load = async () => {
        let page;
        try {
            page = await listPage(
                {...filter, limit: undefined, cursor: cursor || undefined}, filter.limit);
        } catch (error) {
            problem.replaceChildren(problemElement(error));
            return;
        }
        problem.replaceChildren();
        updateRows(tbody, page.instances);
        pager.replaceChildren(pageLinks(filter, cursor, page.next, key));
        updated.textContent = `Updated ${formatTime(new Date().toISOString()).slice(11, 19)} UTC`;
        updated.dataset.at = String(Date.now());
    };
    load();
    const stop = poll(() => (live.checked ? load() : null), REFRESH_MS);
    live.addEventListener('change', () => {
        if (live.checked) load();
    });
    return () => stop();
}
