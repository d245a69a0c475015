// Every action goes through one confirmation dialog (the <dialog> in index.html): it says what
// will happen to which instance, may hold the action's inputs (a journal position, a
// signal), and runs the call only on "Confirm". A refusal stays in the dialog, the API's
// error as it came ("409 Conflict: ..."), so the operator reads it where they acted; success
// closes it and is announced in the page's notice area.

import {h, problemText} from './dom.js';

const dialog = () => document.getElementById('confirm');

export function notify(text, kind = 'ok') {
    const notice = document.getElementById('notice');
    notice.className = `notice notice-${kind}`;
    notice.textContent = text;
    notice.hidden = false;
}

export function clearNotice() {
    const notice = document.getElementById('notice');
    notice.hidden = true;
    notice.textContent = '';
}

let pending = null;  // the open confirmation: {run, done}

// Opens the dialog. `body`: nodes to show (inputs included); `run`: async, performs the call
// and returns the success message, or throws (an ApiError, or an Error for bad input).
export function confirmAction({title, body, confirm, run, done}) {
    const d = dialog();
    document.getElementById('confirm-title').textContent = title;
    document.getElementById('confirm-body').replaceChildren(...[body].flat().filter(Boolean));
    document.getElementById('confirm-ok').textContent = confirm;
    setProblem(null);
    setBusy(false);
    pending = {run, done};
    d.showModal();
    const first =
        d.querySelector('#confirm-body input, #confirm-body textarea, #confirm-body select');
    (first || document.getElementById('confirm-cancel')).focus();
}

function setProblem(error) {
    const p = document.getElementById('confirm-problem');
    p.hidden = !error;
    p.textContent = error ? problemText(error) : '';
}

function setBusy(busy) {
    document.getElementById('confirm-ok').disabled = busy;
    document.getElementById('confirm-cancel').disabled = busy;
}

async function onConfirm(event) {
    event.preventDefault();
    if (!pending) return;
    const {run, done} = pending;
    setBusy(true);
    setProblem(null);
    try {
        const message = await run();
        pending = null;
        dialog().close();
        notify(message);
        if (done) done();
    } catch (error) {
        setProblem(error);
        setBusy(false);
    }
}

function onClose() { pending = null; }

// Wires the dialog once, at start-up.
export function setupDialog() {
    const d = dialog();
    document.getElementById('confirm-form').addEventListener('submit', onConfirm);
    document.getElementById('confirm-cancel').addEventListener('click', () => d.close());
    d.addEventListener('close', onClose);
}

// A labelled input for a dialog, with an optional hint the input is described by.
export function field(label, input, hint) {
    const id = `field-${Math.random().toString(36).slice(2)}`;
    input.id = id;
    const nodes = [h('label', {htmlFor: id}, label), input];
    if (hint) {
        const hintId = `${id}-hint`;
        input.setAttribute('aria-describedby', hintId);
        nodes.push(h('p', {id: hintId, class: 'hint'}, hint));
    }
    return h('div', {class: 'field'}, nodes);
}
