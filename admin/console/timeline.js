// An instance's journal drawn over time (SVG): one lane per step name with a bar per run
// (failed runs hatched), a lane of waits where the gaps before signals and timers are dashed
// lines, signals diamonds, timer firings circles, races triangles and their winners ringed,
// and what is in flight now (a step's attempt, the current wait) open to the right.
//
// A step's bar runs from when its first attempt began (`started`) to its commit, labelled
// with its attempts when it took more than one; journals written before steps recorded
// `started` fall back to the previous entry's commit. Steps in flight show their current
// attempt, which the API reports. The journal table below it is the same information as
// text.

import {FINAL, formatDuration, formatTime, h, s} from './dom.js';

const LANE = 30;
const TOP = 6;
const AXIS = 30;

function timeOf(iso, fallback) {
    const t = iso ? Date.parse(iso) : NaN;
    return Number.isNaN(t) ? fallback : t;
}

// The lanes and what is drawn on them, in time; `winners` maps a journal position to the
// race entry it won. A `historical` journal (kept by a retry) ends with its last entry: what
// the instance does now is not part of it.
export function buildModel(instance, entries, {now = Date.now(), historical = false} = {}) {
    const first = entries.length ? timeOf(entries[0].at, now) : now;
    const start = timeOf(instance.created, first);
    const lanes = new Map();
    const lane = (key, label) => {
        if (!lanes.has(key)) lanes.set(key, {key, label, items: []});
        return lanes.get(key);
    };
    const waits = lane('waits', 'waits & signals');
    const winners = new Map();
    // A retry from entry N ran the entries from N on again, starting at the retry.
    const retriedAt = new Map();
    if (!historical) {
        for (const r of instance.retries || []) retriedAt.set(r.from, timeOf(r.at, start));
    }
    let last = start;
    entries.forEach((e, i) => {
        const at = timeOf(e.at, last);
        const estimate = Math.min(at, Math.max(last, retriedAt.get(e.position) ?? last));
        const began = timeOf(e.started, NaN);
        const from = e.kind === 'run' && began < at ? began : estimate;
        if (e.kind === 'run' || e.kind === 'lock' || e.kind === 'relock') {
            const kind = e.kind === 'relock' ? 'lock' : e.kind;
            const label = kind === 'run' ? e.name : `lock ${e.name}`;
            lane(`${kind}:${e.name}`, label || kind)
                .items.push({type: 'bar', from, to: at, entry: e, failed: Boolean(e.failed)});
        } else if (e.kind === 'signal' || e.kind === 'timer') {
            waits.items.push({type: 'gap', from, to: at, entry: e});
            waits.items.push({type: e.kind, at, entry: e});
        } else if (e.kind === 'race' || e.kind === 'any') {
            waits.items.push({type: 'race', at, entry: e});
            if (i > 0) winners.set(entries[i - 1].position, e);
        } else {
            waits.items.push({type: 'value', at, entry: e});
        }
        last = Math.max(last, at);
    });

    const final = FINAL.has(instance.status) || instance.status === 'parked';
    const end = historical ? last :
        final              ? Math.max(last, timeOf(instance.changed, last)) :
                             Math.max(last, now);
    if (historical) {
        // Nothing open.
    } else if (instance.status === 'running') {
        for (const step of instance.steps || []) {
            lane(`run:${step.name}`, step.name)
                .items.push({type: 'bar', from: last, to: end, open: true, step});
        }
    } else if (instance.status === 'suspended') {
        const what = [
            ...(instance.waits || []).map((w) => w.path),
            ...(instance.timers || []).map((t) => `timer "${t.name}"`)
        ];
        waits.items.push({type: 'gap', from: last, to: end, open: true, what});
    } else if (instance.status === 'parked') {
        const what = (instance.waits || []).map((w) => w.path);
        if (what.length && end > last)
            waits.items.push({type: 'gap', from: last, to: end, parked: true, what});
        waits.items.push({type: 'parked', at: end, reason: instance.reason});
    }
    if (!historical) {
        (instance.retries || []).forEach((r, i) => {
            const at = timeOf(r.at, NaN);
            if (at >= start && at <= end) waits.items.push({type: 'retry', at, n: i + 1, retry: r});
        });
    }
    for (const l of lanes.values()) {
        for (const item of l.items) {
            if (item.entry && winners.has(item.entry.position))
                item.winner = winners.get(item.entry.position);
        }
    }
    return {start, end: Math.max(end, start + 1), lanes: [...lanes.values()], winners};
}

// Tick spacing: 1, 2 or 5 times a power of ten milliseconds, at most `count` ticks.
function tickStep(span, count) {
    const raw = span / count;
    const power = 10 ** Math.floor(Math.log10(raw));
    for (const m of [1, 2, 5, 10])
        if (m * power >= raw) return m * power;
    return 10 * power;
}

function describe(item) {
    const e = item.entry;
    const where = e ? ` (entry ${e.position}, operation #${e.seq})` : '';
    const won = item.winner ? `; won race #${item.winner.seq} (arm ${item.winner.value})` : '';
    switch (item.type) {
        case 'bar':
            if (item.open) {
                const err = item.step.last_error ? `; last error: ${item.step.last_error}` : '';
                return `${item.step.name}: in flight, attempt ${item.step.attempt}${err}`;
            }
            return `${e.name}: ${item.failed ? 'failed' : 'done'} after ${
                       formatDuration(item.to - item.from)}${attemptsText(e)}` +
                `${where}, committed ${formatTime(e.at)}${won}`;
        case 'gap':
            if (item.open)
                return `waiting ${formatDuration(item.to - item.from)} so far for ${
                    item.what.join(', ')}`;
            if (item.parked)
                return `waited ${formatDuration(item.to - item.from)} for ${
                    item.what.join(', ')}, then parked`;
            return `waited ${formatDuration(item.to - item.from)} for ${e.kind} ${e.name}`;
        case 'signal':
            return `signal ${e.name} received ${formatTime(e.at)}${where}${won}`;
        case 'timer':
            return `timer "${e.name}" fired ${formatTime(e.at)}${where}${won}`;
        case 'race':
            return `${e.kind} #${e.seq} decided: arm ${JSON.stringify(e.value)} won${where}`;
        case 'parked':
            return `parked: ${item.reason || ''}`;
        case 'retry':
            return `retry ${item.n} by an operator, ${formatTime(item.retry.at)}: entries from ` +
                `${item.retry.from} on were run again (the journal had ${
                       item.retry.journal_length})`;
        default:
            return `${e.kind} recorded ${formatTime(e.at)}${where}`;
    }
}

// ", 3 attempts" for a step that took more than one, else "".
function attemptsText(e) { return e && e.attempts > 1 ? `, ${e.attempts} attempts` : ''; }

function drawItem(item, x, mid) {
    const title = s('title', null, describe(item));
    const cls = (base) => `${base}${item.winner ? ' winner' : ''}`;
    switch (item.type) {
        case 'bar': {
            const x0 = x(item.from);
            const w = Math.max(3, x(item.to) - x0);
            const kind = item.open ? 'open' : item.failed ? 'failed' : 'done';
            const parts =
                [s('rect',
                   {class: cls(`bar bar-${kind}`), x: x0, y: mid - 7, width: w, height: 14, rx: 2},
                   title)];
            const label = item.open ? `attempt ${item.step.attempt}` :
                item.failed ? `failed${attemptsText(item.entry)}` :
                              attemptsText(item.entry).replace(/^, /, '');
            if (label) parts.push(s('text', {class: 'bar-text', x: x0 + w + 4, y: mid + 4}, label));
            return parts;
        }
        case 'gap': {
            const x1 = x(item.from);
            const x2 = x(item.to);
            const parts =
                [s('line', {class: `gap${item.open ? ' gap-open' : ''}`, x1, x2, y1: mid, y2: mid},
                   title)];
            // Wide enough: say what it waited for above the line.
            if (x2 - x1 > 140) {
                const what = item.open || item.parked ?
                    `waiting for ${item.what.join(', ')}` :
                    `${formatDuration(item.to - item.from)} for ${
                        item.entry.kind === 'timer' ? `timer "${item.entry.name}"` :
                                                      item.entry.name}`;
                parts.push(
                    s('text',
                      {class: 'gap-text', x: (x1 + x2) / 2, y: mid - 5, 'text-anchor': 'middle'},
                      truncate(what, Math.floor((x2 - x1 - 24) / 6.5))));
            }
            return parts;
        }
        case 'signal': {
            const cx = x(item.at);
            return s(
                'polygon', {
                    class: cls('mark mark-signal'),
                    points: `${cx},${mid - 7} ${cx + 7},${mid} ${cx},${mid + 7} ${cx - 7},${mid}`
                },
                title);
        }
        case 'timer':
            return s(
                'circle', {class: cls('mark mark-timer'), cx: x(item.at), cy: mid, r: 6}, title);
        case 'race': {
            const cx = x(item.at);
            return s(
                'polygon', {
                    class: 'mark mark-race',
                    points: `${cx - 6},${mid - 12} ${cx + 6},${mid - 12} ${cx},${mid - 4}`
                },
                title);
        }
        case 'parked': {
            const cx = x(item.at);
            return [
                s('rect', {class: 'mark mark-parked', x: cx - 5, y: mid - 5, width: 10, height: 10},
                  title),
                s('text', {class: 'bar-text', x: cx - 8, y: mid + 4, 'text-anchor': 'end'},
                  'parked')
            ];
        }
        case 'retry': {
            const cx = x(item.at);
            return [
                s('line', {class: 'retry-line', x1: cx, x2: cx, y1: mid - 12, y2: mid + 12}, title),
                s('text', {class: 'bar-text', x: cx - 4, y: mid + 12, 'text-anchor': 'end'},
                  `↻ retry ${item.n}`)
            ];
        }
        default: {
            const cx = x(item.at);
            return s('line', {class: 'tick', x1: cx, x2: cx, y1: mid - 6, y2: mid + 6}, title);
        }
    }
}

function axis(model, x, y, plotLeft, plotRight) {
    const span = model.end - model.start;
    const step = tickStep(span, Math.max(2, Math.floor((plotRight - plotLeft) / 110)));
    const parts = [s('line', {class: 'axis', x1: plotLeft, x2: plotRight, y1: y, y2: y})];
    for (let t = 0; t <= span + 1e-9; t += step) {
        const tx = x(model.start + t);
        parts.push(s('line', {class: 'axis', x1: tx, x2: tx, y1: y, y2: y + 4}));
        parts.push(
            s('text', {class: 'axis-text', x: tx, y: y + 16, 'text-anchor': 'middle'},
              t === 0 ? '0' : `+${formatDuration(t)}`));
    }
    return parts;
}

function truncate(text, chars) {
    return text.length <= chars ? text : `${text.slice(0, Math.max(1, chars - 1))}…`;
}

// The timeline as a <figure>: the SVG, a caption saying what it spans, and a legend in words.
export function timeline(
    instance, entries, {width = 900, now = Date.now(), historical = false} = {}) {
    const model = buildModel(instance, entries, {now, historical});
    const closed = historical || FINAL.has(instance.status) || instance.status === 'parked';
    const labelWidth = Math.round(Math.min(200, Math.max(96, width * 0.26)));
    const plotLeft = labelWidth + 10;
    const plotRight = width - 70;
    const x = (t) =>
        plotLeft + ((t - model.start) / (model.end - model.start)) * (plotRight - plotLeft);
    const height = TOP + model.lanes.length * LANE + AXIS;
    const steps = model.lanes.length - 1;
    const captionId = 'timeline-caption';

    const svg =
        s('svg', {
            class: 'timeline',
            width,
            height,
            viewBox: `0 0 ${width} ${height}`,
            role: 'img',
            'aria-labelledby': captionId
        },
          s('defs', null,
            s('pattern', {
                id: 'hatch',
                width: 6,
                height: 6,
                patternUnits: 'userSpaceOnUse',
                patternTransform: 'rotate(45)'
            },
              s('rect', {class: 'hatch-bg', width: 6, height: 6}),
              s('line', {class: 'hatch-line', x1: 0, y1: 0, x2: 0, y2: 6}))),
          model.lanes.map((l, i) => {
              const top = TOP + i * LANE;
              const mid = top + LANE / 2;
              return s(
                  'g', {class: 'lane'},
                  s('rect',
                    {class: i % 2 ? 'lane-bg odd' : 'lane-bg', x: 0, y: top, width, height: LANE}),
                  s('text', {class: 'lane-text', x: labelWidth, y: mid + 4, 'text-anchor': 'end'},
                    s('title', null, l.label), truncate(l.label, Math.floor(labelWidth / 7))),
                  l.items.map((item) => drawItem(item, x, mid)));
          }),
          axis(model, x, TOP + model.lanes.length * LANE + 4, plotLeft, plotRight));

    const span = formatDuration(model.end - model.start);
    const caption =
        h('figcaption', {id: captionId},
          `Journal timeline: ${entries.length} entries, ${steps} step lane${
              steps === 1 ? '' : 's'}, ` +
              `over ${span} from ${formatTime(new Date(model.start).toISOString())}` +
              `${closed ? '' : ' to now'}.`);
    const legend =
        h('ul', {class: 'legend', 'aria-label': 'Legend'},
          h('li', null, h('span', {class: 'key key-bar'}),
            'step: from its first attempt to its commit, with its attempts when more than one'),
          h('li', null, h('span', {class: 'key key-failed'}), 'step failed for good'),
          h('li', null, h('span', {class: 'key key-open'}), 'step in flight, with its attempt'),
          h('li', null, h('span', {class: 'key key-gap'}), 'waiting (a gap)'),
          h('li', null, h('span', {class: 'key'}, '◆'), 'signal received'),
          h('li', null, h('span', {class: 'key'}, '●'), 'timer fired'),
          h('li', null, h('span', {class: 'key'}, '▼'), 'race decided; its winner has a ring'),
          h('li', null, h('span', {class: 'key'}, '|'), 'value recorded (now, random, uuid)'),
          h('li', null, h('span', {class: 'key'}, '↻'), 'retried by an operator'));
    return h(
        'figure', {class: 'timeline-figure'}, h('div', {class: 'timeline-scroll'}, svg), caption,
        legend);
}
