// The walhook operator console: five pages over the admin API (docs/api.md), hash-routed.
//   #/                the endpoints, worst first, with the stream's state; auto-refreshed
//   #/endpoints/ID    one endpoint: settings, deliveries, dead letters, recent outcomes, actions
//   #/events/UUID     one event: which endpoints got it, when, after how many attempts
//   #/sources         the inbox's sources (walhook ingest) with their counters
//   #/sources/NAME    one source: counters, destinations, quarantined and deferred events, replay
// Every piece of data is put in the page as text (textContent, createTextNode, setAttribute),
// never parsed as HTML: endpoint URLs, errors and event types come from customers' systems.
'use strict';

(() => {
  const REFRESH_MS = 5000;
  const PAGE_SIZE = 100;  // endpoints per page of GET /api/endpoints ("Show more" adds a page)
  const TOKEN_KEY = 'walhook.token';
  const OPERATOR_KEY = 'walhook.operator';

  // What survives re-renders: the endpoints table's sort, the current route's generation (a
  // page's late answers are dropped once the operator has moved on) and its refresh timer.
  const state = {
    sort: { key: null, dir: 1 },  // key null: the API's order (worst first)
    generation: 0,
    timer: null,
  };

  // ---------------------------------------------------------------- DOM helpers

  /** el('td', {class: 'num', title: x}, child, 'text', …): an element; children are nodes or text. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const $ = (id) => document.getElementById(id);

  function dash() { return el('span', { class: 'muted', 'aria-label': 'none' }, '—'); }

  function endpointHref(id) { return '#/endpoints/' + encodeURIComponent(String(id)); }
  function eventHref(id) { return '#/events/' + encodeURIComponent(String(id)); }

  // ---------------------------------------------------------------- formatting

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return null;
    const s = Math.max(0, seconds);
    if (s < 0.005) return '0 s';
    if (s < 10) return s.toFixed(s < 1 ? 2 : 1) + ' s';
    if (s < 60) return Math.round(s) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + String(Math.round(s % 60)).padStart(2, '0') + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  }

  /** A long URL cut in the middle, so both its host and the end of its path stay readable. */
  function shortUrl(u, max = 36) {
    if (!u || u.length <= max) return u || '';
    const head = Math.ceil((max - 1) * 0.5);
    return u.slice(0, head) + '…' + u.slice(u.length - (max - 1 - head));
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return null;
    const units = ['B', 'kB', 'MB', 'GB', 'TB'];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; ++i; }
    return (i === 0 ? String(v) : v.toFixed(1)) + ' ' + units[i];
  }

  /** "2026-12-01 17:05:00 UTC" */
  function fmtUtc(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, '').replace(/Z$/, '') + ' UTC';
  }

  /** "3 min ago", "in 20 s" */
  function fmtRelative(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    const delta = (d.getTime() - Date.now()) / 1000;
    if (Math.abs(delta) < 1) return 'now';
    const text = fmtDuration(Math.abs(delta)).replace(/ \d+ s$/, '').replace(/ 0?0 min$/, '');
    return delta > 0 ? 'in ' + text : text + ' ago';
  }

  /** A time cell: relative, with the exact UTC time as its title. */
  function timeNode(iso, { full = false } = {}) {
    if (!iso) return dash();
    const rel = fmtRelative(iso);
    return el('time', { datetime: iso, title: fmtUtc(iso) }, full ? fmtUtc(iso) + ' (' + rel + ')' : rel);
  }

  // GET /api/endpoints/{id}: `dead` is the count, `dead_letters` the newest 50 (docs/api.md);
  // an older draft had the list under `dead`, read that too.
  function deadLetters(e) {
    return Array.isArray(e.dead_letters) ? e.dead_letters : Array.isArray(e.dead) ? e.dead : [];
  }
  function deadCount(e) {
    if (typeof e.dead === 'number') return e.dead;
    if (typeof e.dead_count === 'number') return e.dead_count;
    const n = deadLetters(e).length;
    return n >= 50 ? '50+' : n;
  }

  function numNode(n) { return n === null || n === undefined ? dash() : String(n); }

  /** Status of an endpoint as the operator should read it: the breaker's pause is a pause. */
  function endpointStatus(e) {
    if (e.status === 'active' && e.paused_by_breaker) return 'paused (breaker)';
    if (e.status === 'paused' && e.paused_by_breaker) return 'paused (breaker)';
    return e.status || 'unknown';
  }

  function statusBadge(text, title) {
    const kind = {
      'active': 'ok', 'delivered': 'ok', 'streaming': 'ok',
      'paused': 'warn', 'paused (breaker)': 'bad', 'pending': 'warn', 'sending': 'info', 'in_flight': 'info',
      'disabled': 'off', 'dead': 'bad', 'not streaming': 'bad', 'unknown': 'off', 'merged': 'off', 'not_routed': 'off',
    }[text] || 'info';
    return el('span', { class: 'badge badge-' + kind, title: title || null }, text);
  }

  function httpStatusNode(status) {
    if (status === null || status === undefined) return dash();
    const kind = status >= 200 && status < 300 ? 'ok' : status >= 500 || status === 0 ? 'bad' : 'warn';
    return el('span', { class: 'http http-' + kind }, String(status));
  }

  function errorText(text) {
    if (!text) return dash();
    return el('span', { class: 'error-text', title: text }, text);
  }

  // ---------------------------------------------------------------- the API

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  let tokenPrompt = null;  // one token dialog for all requests that got 401 meanwhile

  /** Calls the admin API; resolves with the parsed JSON, rejects with an ApiError (readable message). */
  async function api(method, path, body) {
    for (let round = 0; ; ++round) {
      const headers = { 'Accept': 'application/json' };
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers['Authorization'] = 'Bearer ' + token;
      const operator = sessionStorage.getItem(OPERATOR_KEY);
      if (operator) headers['X-Walhook-Operator'] = encodeURIComponent(operator);  // header values are ASCII
      const init = { method, headers, cache: 'no-store' };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      let res;
      try {
        res = await fetch(path, init);
      } catch (e) {
        throw new ApiError(0, 'walhook did not answer (' + e.message + '). Is it still running?');
      }
      if (res.status === 401 && round < 3) {
        const saved = await askToken(token ? 'The token was not accepted; enter it again.' : null);
        if (!saved) throw new ApiError(401, 'Not signed in: this walhook needs its admin token (Sign in, top right).');
        continue;
      }
      const text = await res.text();
      let data = null;
      try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
      if (!res.ok) {
        const why = data && typeof data.error === 'string' ? data.error : (text.trim() || res.statusText);
        throw new ApiError(res.status, 'HTTP ' + res.status + ': ' + why);
      }
      return data;
    }
  }

  // ---------------------------------------------------------------- sign-in dialog

  function askToken(reason) {
    if (tokenPrompt) return tokenPrompt;
    const dialog = $('token-dialog');
    $('token-why').textContent = reason ||
      'This walhook needs its admin token (the content of its --admin-token-file).';
    $('token-input').value = sessionStorage.getItem(TOKEN_KEY) || '';
    $('operator-input').value = sessionStorage.getItem(OPERATOR_KEY) || '';
    tokenPrompt = new Promise((resolve) => {
      const finish = (saved) => {
        dialog.removeEventListener('close', onClose);
        tokenPrompt = null;
        updateSignIn();
        resolve(saved);
      };
      const onClose = () => {
        if (dialog.returnValue !== 'save') return finish(false);
        const token = $('token-input').value.trim();
        // Header values are Latin-1 in fetch(); keep names to printable ASCII so a request never throws.
        const operator = $('operator-input').value.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 100);
        if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
        if (operator) sessionStorage.setItem(OPERATOR_KEY, operator); else sessionStorage.removeItem(OPERATOR_KEY);
        finish(true);
      };
      dialog.returnValue = '';
      dialog.addEventListener('close', onClose);
      dialog.showModal();
      $('token-input').focus();
    });
    return tokenPrompt;
  }

  function updateSignIn() {
    const who = sessionStorage.getItem(OPERATOR_KEY);
    const token = sessionStorage.getItem(TOKEN_KEY);
    $('token-button').textContent = who ? 'Operator: ' + who : token ? 'Signed in' : 'Sign in';
  }

  // ---------------------------------------------------------------- confirmation dialog

  /**
   * Asks before an action. `what` says what will happen; `run` performs it and resolves with
   * the API's answer; `describe(answer)` turns that into lines the operator reads. The dialog
   * then shows what changed (or the error) and the page refreshes when it closes.
   */
  function confirmAction({ title, what, button, run, describe }) {
    const dialog = $('confirm-dialog');
    const ok = $('confirm-ok');
    const cancel = $('confirm-cancel');
    const result = $('confirm-result');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = what;
    result.replaceChildren();
    ok.textContent = button;
    ok.hidden = false;
    ok.disabled = false;
    cancel.textContent = 'Cancel';
    let acted = false;
    let working = false;

    return new Promise((resolve) => {
      const onOk = async () => {
        working = true;
        ok.disabled = true;
        cancel.disabled = true;
        result.replaceChildren(el('p', { class: 'muted' }, 'Working…'));
        try {
          const answer = await run();
          acted = true;
          const lines = describe(answer);
          result.replaceChildren(
            el('div', { class: 'done-box', role: 'status' },
              el('strong', {}, 'Done. '), lines.map((l) => el('p', {}, l))),
            el('details', {}, el('summary', {}, 'API answer'), el('pre', {}, JSON.stringify(answer, null, 2))));
          ok.hidden = true;
        } catch (e) {
          result.replaceChildren(el('div', { class: 'error-box', role: 'alert' }, e.message));
          ok.disabled = false;
          ok.textContent = 'Try again';
        }
        working = false;
        cancel.disabled = false;
        cancel.textContent = 'Close';
        cancel.focus();
      };
      const onCancel = () => dialog.close('cancel');
      // Escape while the request runs would hide its answer: the operator must see what changed.
      const onEscape = (ev) => { if (working) ev.preventDefault(); };
      const onClose = () => {
        ok.removeEventListener('click', onOk);
        cancel.removeEventListener('click', onCancel);
        dialog.removeEventListener('cancel', onEscape);
        dialog.removeEventListener('close', onClose);
        resolve(acted);
      };
      ok.addEventListener('click', onOk);
      cancel.addEventListener('click', onCancel);
      dialog.addEventListener('cancel', onEscape);
      dialog.addEventListener('close', onClose);
      dialog.showModal();
      cancel.focus();  // the safe choice has the focus
    });
  }

  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  /** Lines for one operations::change {endpoint_id, action, deliveries, note}. */
  function describeChange(c) {
    if (!c || typeof c !== 'object') return ['walhook answered: ' + JSON.stringify(c)];
    const lines = ['Endpoint ' + c.endpoint_id + ': ' + (c.action || 'changed') + ', ' +
      plural(c.deliveries || 0, 'delivery', 'deliveries') + ' affected.'];
    if (c.note) lines.push(c.note);
    return lines;
  }

  function describeReplay(r) {
    const changes = (r && r.changes) || [];
    const lines = [plural((r && r.replayed) || 0, 'dead letter', 'dead letters') + ' replayed.'];
    for (const c of changes) lines.push(...describeChange(c));
    return lines;
  }

  function isDialogOpen() {
    return $('confirm-dialog').open || $('token-dialog').open;
  }

  // ---------------------------------------------------------------- page frame

  function setMain(...nodes) {
    $('main').replaceChildren(...nodes);
  }

  function errorBox(e, retry) {
    return el('div', { class: 'error-box', role: 'alert' },
      el('p', {}, e.message || String(e)),
      retry ? el('button', { type: 'button', onclick: retry }, 'Retry') : null);
  }

  /** Re-runs `load` every REFRESH_MS while the route stays and no dialog is open. */
  function autoRefresh(gen, load) {
    clearTimeout(state.timer);
    state.timer = setTimeout(async () => {
      if (gen !== state.generation) return;
      if (!isDialogOpen() && !document.hidden) await load(true);
      if (gen === state.generation) autoRefresh(gen, load);
    }, REFRESH_MS);
  }

  function updatedNote(node) {
    node.textContent = 'Updated ' + new Date().toLocaleTimeString();
  }

  function section(title, id, ...children) {
    return el('section', { class: 'card', id: id || null, 'aria-labelledby': id ? id + '-title' : null },
      el('h2', { id: id ? id + '-title' : null }, title), ...children);
  }

  // ---------------------------------------------------------------- #/ endpoints

  const ENDPOINT_COLUMNS = [
    { key: 'id', label: 'ID', num: true,
      cell: (e) => el('a', { href: endpointHref(e.id), class: 'endpoint-link' }, String(e.id)) },
    { key: 'tenant_id', label: 'Tenant', cell: (e) => e.tenant_id },
    { key: 'url', label: 'URL', cell: (e) => el('a', { href: endpointHref(e.id), class: 'url', title: e.url }, shortUrl(e.url)) },
    { key: 'status', label: 'Status', value: endpointStatus,
      cell: (e) => statusBadge(endpointStatus(e), e.disabled_reason || null) },
    { key: 'pending', label: 'Pending', title: 'Pending deliveries (rows)', num: true, cell: (e) => numNode(e.pending) },
    { key: 'oldest_pending_age_s', label: 'Oldest', title: 'Age of the oldest pending delivery', num: true,
      cell: (e) => fmtDuration(e.oldest_pending_age_s) || dash() },
    { key: 'in_flight', label: 'In flight', title: 'Attempts in flight now', num: true, cell: (e) => numNode(e.in_flight) },
    { key: 'max_concurrency', label: 'Max conc.', title: 'max_concurrency: attempts at once', num: true, cell: (e) => numNode(e.max_concurrency) },
    { key: 'consecutive_failures', label: 'Failures', title: 'Consecutive failures', num: true, cell: (e) => numNode(e.consecutive_failures) },
    { key: 'paused_until', label: 'Paused until', value: (e) => e.paused_until ? Date.parse(e.paused_until) : null,
      num: true, cell: (e) => timeNode(e.paused_until) },
    { key: 'dead', label: 'Dead', title: 'Dead letters', num: true, cell: (e) => numNode(e.dead) },
    { key: 'last_status', label: 'Last status', num: true, cell: (e) => httpStatusNode(e.last_status) },
    { key: 'last_error', label: 'Last error', cell: (e) => errorText(e.last_error) },
  ];

  function columnValue(col, e) {
    const v = col.value ? col.value(e) : e[col.key];
    return v === undefined ? null : v;
  }

  /** The rows in the chosen order; ties (and the default) keep the API's worst-first order. */
  function sortedEndpoints(list) {
    const rows = list.map((e, i) => ({ e, i }));
    const col = ENDPOINT_COLUMNS.find((c) => c.key === state.sort.key);
    if (!col) return rows.map((r) => r.e);
    const dir = state.sort.dir;
    rows.sort((a, b) => {
      const va = columnValue(col, a.e), vb = columnValue(col, b.e);
      if (va === null && vb === null) return a.i - b.i;
      if (va === null) return 1;  // empty cells last, whichever the direction
      if (vb === null) return -1;
      let c = col.num ? Number(va) - Number(vb) : String(va).localeCompare(String(vb), undefined, { numeric: true });
      if (c === 0) return a.i - b.i;
      return c * dir;
    });
    return rows.map((r) => r.e);
  }

  function endpointRowClass(e) {
    if (e.status === 'disabled') return 'row-off';
    if (e.paused_by_breaker || (e.consecutive_failures || 0) > 0) return 'row-bad';
    if (e.status === 'paused') return 'row-warn';
    return null;
  }

  function overviewCards(o) {
    const item = (label, value, extra) =>
      el('div', { class: 'stat' }, el('div', { class: 'stat-label' }, label),
        el('div', { class: 'stat-value' }, value === null || value === undefined ? dash() : value),
        extra ? el('div', { class: 'stat-extra' }, extra) : null);
    const lagClass = o.slot_lag_seconds > 60 ? 'bad' : o.slot_lag_seconds > 5 ? 'warn' : 'ok';
    const rec = o.recent_outcomes || {};
    return el('div', { class: 'stats', id: 'overview-stats' },
      item('Stream', statusBadge(o.streaming ? 'streaming' : 'not streaming'),
        o.slot ? 'slot ' + o.slot + (o.slot_wal_status ? ' · WAL ' + o.slot_wal_status : '') : null),
      // Not streaming (a standby, reconnecting): this process's lag figure means nothing.
      item('Slot lag', o.streaming
        ? el('span', { class: 'lag lag-' + lagClass, id: 'slot-lag' }, fmtDuration(o.slot_lag_seconds) || '—')
        : el('span', { class: 'lag', id: 'slot-lag', title: 'this walhook does not stream the slot' }, '—'),
        fmtBytes(o.slot_lag_bytes) !== null ? fmtBytes(o.slot_lag_bytes) + ' behind' +
          (o.confirmed_lsn ? ' · confirmed ' + o.confirmed_lsn : '') : null),
      item('Queued', numNode(o.queued), 'waiting in memory'),
      item('In flight', numNode(o.in_flight), 'attempts now'),
      item('Recent outcomes', rec.kept !== undefined ? String(rec.kept) : null,
        rec.capacity !== undefined ? 'of ' + rec.capacity + ' kept' + (rec.since ? ', since ' + fmtRelative(rec.since) : '') : null));
  }

  function lookupForm() {
    const input = el('input', { type: 'text', id: 'event-lookup-input', name: 'event', required: true,
      placeholder: '0190a1b2-…', spellcheck: 'false', autocomplete: 'off', size: 38 });
    return el('form', {
      class: 'lookup', id: 'event-lookup', role: 'search',
      onsubmit: (ev) => {
        ev.preventDefault();
        const id = input.value.trim();
        if (id) location.hash = eventHref(id);
      },
    }, el('label', { for: 'event-lookup-input' }, 'Event lookup'), input,
    el('button', { type: 'submit' }, 'Find event'));
  }

  function endpointsPage(gen) {
    const overview = el('div', { id: 'overview' }, el('p', { class: 'muted' }, 'Loading…'));
    const banner = el('div', { id: 'endpoints-error' });
    const updated = el('span', { class: 'muted updated', id: 'endpoints-updated', 'aria-live': 'off' });
    const resetSort = el('button', { type: 'button', class: 'link-button', id: 'sort-reset', hidden: true,
      onclick: () => { state.sort = { key: null, dir: 1 }; render(); } }, 'Back to worst first');
    const headRow = el('tr', {});
    const tbody = el('tbody', {});
    const table = el('table', { id: 'endpoints-table', class: 'data' },
      el('caption', { class: 'sr-only' }, 'Endpoints; click a column header to sort'),
      el('thead', {}, headRow), tbody);
    let endpoints = null;
    let pages = 1;  // pages of GET /api/endpoints shown; each refresh loads as many again
    let next = null;  // the cursor of the page after them, null after the last
    const shownNote = el('span', { class: 'muted', id: 'endpoints-shown' });
    const more = el('button', { type: 'button', id: 'endpoints-more', hidden: true,
      onclick: () => { pages += 1; load(false); } }, 'Show ' + PAGE_SIZE + ' more');

    /** The first `pages` pages of the endpoints, worst first, and the cursor of the next one. */
    async function fetchEndpoints() {
      const list = [];
      let after = null;
      for (let i = 0; i < pages; i++) {
        const page = await api('GET', '/api/endpoints?limit=' + PAGE_SIZE +
          (after ? '&after=' + encodeURIComponent(after) : ''));
        list.push(...((page && page.endpoints) || []));
        after = (page && page.next) || null;
        if (!after) break;
      }
      return { list, next: after };
    }

    for (const col of ENDPOINT_COLUMNS) {
      const arrow = el('span', { class: 'sort-arrow', 'aria-hidden': 'true' });
      const th = el('th', { scope: 'col', class: col.num ? 'num' : null, title: col.title || null, dataset: { key: col.key } },
        el('button', {
          type: 'button', class: 'sort', dataset: { sortKey: col.key },
          onclick: () => {
            if (state.sort.key === col.key) state.sort.dir = -state.sort.dir;
            else state.sort = { key: col.key, dir: col.num ? -1 : 1 };  // numbers: biggest first
            render();
          },
        }, col.label, arrow));
      headRow.append(th);
    }

    function render() {
      for (const th of headRow.children) {
        const active = th.dataset.key === state.sort.key;
        th.setAttribute('aria-sort', active ? (state.sort.dir > 0 ? 'ascending' : 'descending') : 'none');
        th.querySelector('.sort-arrow').textContent = active ? (state.sort.dir > 0 ? ' ▲' : ' ▼') : '';
      }
      resetSort.hidden = state.sort.key === null;
      if (!endpoints) return;
      more.hidden = next === null;
      shownNote.textContent = next === null ? '' : 'the worst ' + endpoints.length + ' shown' +
        (state.sort.key === null ? '' : ' (a column sorts those)');
      if (endpoints.length === 0) {
        tbody.replaceChildren(el('tr', {}, el('td', { colspan: ENDPOINT_COLUMNS.length, class: 'muted' },
          'No endpoints yet: add one with `walhook endpoint add`.')));
        return;
      }
      tbody.replaceChildren(...sortedEndpoints(endpoints).map((e) =>
        el('tr', { class: endpointRowClass(e), dataset: { endpointId: e.id } },
          ENDPOINT_COLUMNS.map((col) => el('td', { class: col.num ? 'num' : null, dataset: { col: col.key } }, col.cell(e))))));
    }

    async function load(background) {
      try {
        // The overview answers from memory while PostgreSQL is down: show its cards either way.
        const [oa, la] = await Promise.allSettled([api('GET', '/api/overview'), fetchEndpoints()]);
        if (gen !== state.generation) return;
        if (oa.status === 'fulfilled') {
          const o = oa.value;
          overview.replaceChildren(overviewCards(o));
          $('top-info').textContent = [o.version ? 'walhook ' + o.version : null, o.instance].filter(Boolean).join(' · ');
        } else if (!overview.querySelector('#overview-stats')) {
          overview.replaceChildren();
        }
        if (la.status === 'rejected') throw la.reason;
        if (oa.status === 'rejected') throw oa.reason;
        endpoints = la.value.list;
        next = la.value.next;
        banner.replaceChildren();
        render();
        updatedNote(updated);
      } catch (e) {
        if (gen !== state.generation) return;
        banner.replaceChildren(errorBox(background ? new Error('Refresh failed: ' + e.message) : e,
          () => load(false)));
      }
    }

    setMain(
      el('h1', {}, 'Endpoints'),
      overview,
      lookupForm(),
      banner,
      el('section', { class: 'card', 'aria-labelledby': 'endpoints-title' },
        el('div', { class: 'card-head' }, el('h2', { id: 'endpoints-title' }, 'Worst first'),
          el('span', { class: 'muted' }, 'by oldest pending age, then failures in a row, then dead letters'), resetSort, updated),
        el('div', { class: 'table-wrap' }, table),
        el('div', { class: 'table-foot' }, more, shownNote)));
    render();
    load(false).then(() => autoRefresh(gen, load));
  }

  // ---------------------------------------------------------------- #/endpoints/ID

  function deliveriesTable(rows, endpoint, reload, id) {
    if (!rows || rows.length === 0) return el('p', { class: 'muted', id }, 'None.');
    return el('div', { class: 'table-wrap' }, el('table', { class: 'data', id },
      el('thead', {}, el('tr', {}, ['Event', 'Type', 'Status', 'Attempts', 'Last status', 'Last error',
        'Next attempt', 'Last attempt', 'Created', ''].map((h, i) =>
        el('th', { scope: 'col', class: [3, 4].includes(i) ? 'num' : null }, h || el('span', { class: 'sr-only' }, 'Actions'))))),
      el('tbody', {}, rows.map((d) => el('tr', { dataset: { eventId: d.event_id, deliveryId: d.id } },
        el('td', {}, el('a', { href: eventHref(d.event_id), class: 'mono' }, d.event_id)),
        el('td', {}, d.event_type || dash()),
        el('td', {}, statusBadge(d.status)),
        el('td', { class: 'num' }, numNode(d.attempts)),
        el('td', { class: 'num' }, httpStatusNode(d.last_status)),
        el('td', {}, errorText(d.last_error)),
        el('td', {}, d.status === 'pending' ? timeNode(d.next_attempt_at) : dash()),
        el('td', {}, timeNode(d.last_attempt_at)),
        el('td', {}, timeNode(d.created_at)),
        el('td', {}, resendButton(endpoint, d.event_id, reload)))))));
  }

  function resendButton(endpoint, eventId, reload) {
    return el('button', {
      type: 'button', class: 'small', dataset: { action: 'resend', eventId },
      'aria-label': 'Resend event ' + eventId + ' to endpoint ' + endpoint.id,
      onclick: async () => {
        const acted = await confirmAction({
          title: 'Resend this event?',
          what: 'walhook sends event ' + eventId + ' to endpoint ' + endpoint.id + ' (' + endpoint.url +
            ') again, now, whatever happened before. The receiver gets it with the same webhook-id (' +
            eventId + '), so a receiver that deduplicates can tell it is the same event.',
          button: 'Resend',
          run: () => api('POST', '/api/deliveries/resend', { endpoint_id: endpoint.id, event_id: eventId }),
          describe: describeChange,
        });
        if (acted) reload();
      },
    }, 'Resend');
  }

  function outcomesTable(rows, id, { withEvent = true } = {}) {
    if (!rows || rows.length === 0) return el('p', { class: 'muted', id }, 'None in memory.');
    return el('div', { class: 'table-wrap' }, el('table', { class: 'data', id },
      el('thead', {}, el('tr', {}, [withEvent ? 'Event' : null, 'At', 'Attempt', 'HTTP status', 'Outcome', 'Result', 'Duration']
        .filter(Boolean).map((h) => el('th', { scope: 'col', class: ['Attempt', 'HTTP status', 'Duration'].includes(h) ? 'num' : null }, h)))),
      el('tbody', {}, rows.map((o) => el('tr', {},
        withEvent ? el('td', {}, el('a', { href: eventHref(o.event_id), class: 'mono' }, o.event_id)) : null,
        el('td', {}, timeNode(o.at)),
        el('td', { class: 'num' }, numNode(o.attempt)),
        el('td', { class: 'num' }, httpStatusNode(o.http_status)),
        el('td', {}, el('span', { class: 'outcome outcome-' + String(o.outcome).replace(/[^a-z0-9]/g, '') }, o.outcome || '—')),
        el('td', {}, o.result || dash()),
        el('td', { class: 'num' }, fmtDuration(o.duration_s) || dash()))))));
  }

  function settingsList(e) {
    const row = (term, value) => [el('dt', {}, term), el('dd', {}, value === null || value === undefined || value === '' ? dash() : value)];
    return el('dl', { class: 'settings', id: 'endpoint-settings' },
      row('Tenant', e.tenant_id),
      row('URL', el('span', { class: 'mono url-full' }, e.url)),
      row('Status', statusBadge(endpointStatus(e))),
      e.disabled_reason ? row('Disabled because', e.disabled_reason) : null,
      row('Paused until', e.paused_until ? timeNode(e.paused_until, { full: true }) : null),
      row('Event types', Array.isArray(e.event_types) && e.event_types.length ? e.event_types.join(', ') : 'all'),
      row('Ordering', e.ordering),
      row('Max concurrency', numNode(e.max_concurrency)),
      row('Description', e.description),
      row('Contact endpoint', e.contact_endpoint_id !== null && e.contact_endpoint_id !== undefined
        ? el('a', { href: endpointHref(e.contact_endpoint_id) }, 'endpoint ' + e.contact_endpoint_id) : null),
      row('Secret', el('span', { class: 'mono' }, e.secret_fingerprints || '—')),
      e.secret_grace_until ? row('Old secret valid until', timeNode(e.secret_grace_until, { full: true })) : null,
      // Per-endpoint policies (docs/endpoint-policies.md): secret headers as fingerprints only.
      row('Headers', Array.isArray(e.headers) && e.headers.length
        ? el('div', { class: 'mono' }, e.headers.map((h) => el('div', {}, h))) : null),
      row('Secret headers', e.secret_headers ? el('span', { class: 'mono' }, e.secret_headers) : null),
      row('Filter', e.filter ? el('code', { class: 'mono' }, e.filter) : 'none: every event'),
      row('Max rate', e.max_rate ? e.max_rate + (e.rate_burst ? ', burst ' + e.rate_burst : '') : 'none'),
      // OAuth2 client credentials and the endpoint's own proxy (migration 014): the secret as a fingerprint.
      row('OAuth2', e.oauth ? el('div', { class: 'mono' },
        el('div', {}, e.oauth.token_url), el('div', {}, 'client ' + e.oauth.client_id + ', secret ' + e.oauth.client_secret),
        e.oauth.scope ? el('div', {}, 'scope ' + e.oauth.scope) : null) : 'none'),
      row('Proxy', e.proxy ? el('span', { class: 'mono' }, e.proxy) : 'as walhook run says'));
  }

  function endpointCounters(e) {
    const c = (label, v, cls) => el('div', { class: 'stat' + (cls ? ' ' + cls : '') },
      el('div', { class: 'stat-label' }, label), el('div', { class: 'stat-value' }, v));
    return el('div', { class: 'stats' },
      c('Pending', numNode(e.pending)),
      c('Oldest pending', fmtDuration(e.oldest_pending_age_s) || dash()),
      c('In flight', el('span', {}, numNode(e.in_flight), el('span', { class: 'muted' }, ' / ' + e.max_concurrency))),
      c('Failures in a row', numNode(e.consecutive_failures)),
      c('Dead letters', numNode(deadCount(e))),
      c('Last status', httpStatusNode(e.last_status)));
  }

  function toIso(localValue) {
    if (!localValue) return null;
    const d = new Date(localValue);  // datetime-local: the browser's time zone
    return isNaN(d) ? null : d.toISOString();
  }

  function replayForm(e, reload) {
    const since = el('input', { type: 'datetime-local', id: 'replay-since', step: 1 });
    const until = el('input', { type: 'datetime-local', id: 'replay-until', step: 1 });
    const type = el('input', { type: 'text', id: 'replay-type', placeholder: 'any', spellcheck: false });
    const filter = el('input', { type: 'text', id: 'replay-filter', class: 'mono', spellcheck: false,
      placeholder: '{"data.amount": {"$gte": 100}}' });
    const problem = el('div', { id: 'replay-problem' });
    return el('form', {
      class: 'replay', id: 'replay-form',
      onsubmit: async (ev) => {
        ev.preventDefault();
        const s = toIso(since.value), u = toIso(until.value);
        const t = type.value.trim() || null, f = filter.value.trim() || null;
        const range = s && u ? 'created from ' + fmtUtc(s) + ' to ' + fmtUtc(u)
          : s ? 'created from ' + fmtUtc(s) : u ? 'created before ' + fmtUtc(u) : 'all of them';
        const which = range + (t ? ', of type ' + t : '') + (f ? ', matching the filter ' + f : '');
        const body = { since: s, until: u, event_type: t, filter: f };
        // A dry run counts first: the dialog says how many will go (a bad filter is refused here).
        let count;
        problem.replaceChildren();
        try {
          const r = await api('POST', '/api/endpoints/' + encodeURIComponent(e.id) + '/replay', Object.assign({ dry_run: true }, body));
          count = (r && r.replayed) || 0;
        } catch (err) {
          problem.replaceChildren(el('div', { class: 'error-box', role: 'alert' }, err.message));
          return;
        }
        const acted = await confirmAction({
          title: 'Replay dead letters?',
          what: 'The dead letters of endpoint ' + e.id + ' (' + e.url + '), ' + which + ': ' +
            plural(count, 'delivery', 'deliveries') + ' will start over with fresh attempt counters (' +
            plural(deadCount(e), 'dead letter', 'dead letters') + ' in all now). Of several with one merge key ' +
            'only the newest is replayed, none where a newer one is pending.' +
            (e.status !== 'active' ? ' The endpoint is ' + endpointStatus(e) + ': they go out after it is resumed or enabled.' : ''),
          button: 'Replay',
          run: () => api('POST', '/api/endpoints/' + encodeURIComponent(e.id) + '/replay', body),
          describe: describeReplay,
        });
        if (acted) reload();
      },
    },
    el('div', { class: 'field' }, el('label', { for: 'replay-since' }, 'Events created from'), since),
    el('div', { class: 'field' }, el('label', { for: 'replay-until' }, 'to (before)'), until),
    el('div', { class: 'field' }, el('label', { for: 'replay-type' }, 'Event type'), type),
    el('div', { class: 'field' }, el('label', { for: 'replay-filter' }, 'Payload filter'), filter),
    el('button', { type: 'submit', id: 'replay-button', disabled: !deadCount(e) }, 'Replay dead letters…'),
    problem,
    el('p', { class: 'muted hint' }, 'Leave them empty for all. Times are in your browser\'s time zone. The filter is ' +
      'JSON on the webhook body (docs/endpoint-policies.md); the dialog counts what matches before anything changes.'));
  }

  const STATUS_ACTIONS = {
    pause: {
      label: 'Pause', title: 'Pause this endpoint?',
      what: (e) => 'walhook stops sending to endpoint ' + e.id + ' (' + e.url + '). Its ' + plural(e.pending || 0, 'pending delivery', 'pending deliveries') +
        ' and new events wait until it is resumed; nothing is lost.',
    },
    resume: {
      label: 'Resume', title: 'Resume this endpoint?',
      what: (e) => 'Endpoint ' + e.id + ' (' + e.url + ') becomes active, its circuit breaker closes and its ' +
        plural(e.pending || 0, 'pending delivery', 'pending deliveries') + ' are due now (this is "retry pending now"). Dead letters stay: replay them below.',
    },
    enable: {
      label: 'Enable', title: 'Enable this endpoint?',
      what: (e) => 'Endpoint ' + e.id + ' (' + e.url + ') becomes active again' + (e.disabled_reason ? ' (disabled because: ' + e.disabled_reason + ')' : '') +
        ', its breaker closes and its pending deliveries are due now. Dead letters stay: replay them below.',
    },
  };

  /** Enable only a disabled endpoint, pause only an active one, resume a paused or breaker-paused one. */
  function actionApplies(action, e) {
    if (action === 'enable') return e.status === 'disabled';
    if (action === 'pause') return e.status === 'active';
    // Resume is also "retry pending now": on an active endpoint with pending deliveries too.
    if (action === 'resume') return e.status === 'paused' || (e.status === 'active' && (!!e.paused_by_breaker || (e.pending || 0) > 0));
    return true;
  }

  function endpointActions(e, reload) {
    return el('div', { class: 'actions', role: 'group', 'aria-label': 'Endpoint actions' },
      Object.entries(STATUS_ACTIONS).filter(([action]) => actionApplies(action, e)).map(([action, a]) => el('button', {
        type: 'button', dataset: { action }, id: 'action-' + action,
        onclick: async () => {
          const acted = await confirmAction({
            title: a.title, what: a.what(e), button: a.label,
            run: () => api('POST', '/api/endpoints/' + encodeURIComponent(e.id) + '/' + action, {}),
            describe: describeChange,
          });
          if (acted) reload();
        },
      }, a.label + '…')));
  }

  function endpointPage(gen, id) {
    const body = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
    const banner = el('div', {});
    const updated = el('span', { class: 'muted updated', 'aria-live': 'off' });
    let shown = false;

    async function load(background) {
      try {
        const e = await api('GET', '/api/endpoints/' + encodeURIComponent(id));
        if (gen !== state.generation) return;
        const reload = () => load(true);
        const scroll = window.scrollY;
        body.replaceChildren(
          el('div', { class: 'page-head' },
            el('h1', {}, 'Endpoint ' + e.id, ' ', statusBadge(endpointStatus(e), e.disabled_reason || null)),
            el('p', { class: 'mono url-full' }, e.url),
            endpointActions(e, reload)),
          endpointCounters(e),
          el('div', { class: 'columns' },
            section('Settings', 'settings', settingsList(e)),
            section('Dead letters: replay', 'replay', replayForm(e, reload))),
          section('Recent deliveries', 'deliveries', el('p', { class: 'muted hint' },
            'Rows of walhook.deliveries, newest first (a first-try success leaves none with --record failed: see recent outcomes).'),
          deliveriesTable(e.deliveries, e, reload, 'deliveries-table')),
          section('Dead letters', 'dead', deliveriesTable(deadLetters(e), e, reload, 'dead-table')),
          section('Recent outcomes', 'outcomes', el('p', { class: 'muted hint' }, 'Attempts from this process\'s memory, newest first.'),
            outcomesTable(e.recent_outcomes, 'outcomes-table')));
        if (background) window.scrollTo(0, scroll);
        if (!shown) document.title = 'Endpoint ' + e.id + ' · walhook console';
        shown = true;
        banner.replaceChildren();
        updatedNote(updated);
      } catch (err) {
        if (gen !== state.generation) return;
        if (!shown) body.replaceChildren();
        banner.replaceChildren(errorBox(background ? new Error('Refresh failed: ' + err.message) : err, () => load(false)));
      }
    }

    setMain(el('p', { class: 'crumbs' }, el('a', { href: '#/' }, '← Endpoints'), ' ', updated), banner, body);
    load(false).then(() => autoRefresh(gen, load));
  }

  // ---------------------------------------------------------------- #/events/UUID

  function outcomeSummary(list) {
    if (!list || list.length === 0) return dash();
    return el('ul', { class: 'attempts' }, list.map((o) => el('li', {},
      'attempt ' + o.attempt + ': ', httpStatusNode(o.http_status), ' ', o.outcome || '', ' → ', o.result || '?', ' · ',
      timeNode(o.at))));
  }

  function eventPage(gen, eventId) {
    const body = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
    const banner = el('div', {});

    async function load() {
      try {
        const r = await api('GET', '/api/events/' + encodeURIComponent(eventId));
        if (gen !== state.generation) return;
        const ev = r.event;
        const rows = r.endpoints || [];
        body.replaceChildren(
          el('div', { class: 'page-head' },
            el('h1', {}, 'Event ', el('span', { class: 'mono' }, eventId)),
            ev ? el('dl', { class: 'settings inline', id: 'event-facts' },
              el('dt', {}, 'Tenant'), el('dd', {}, ev.tenant_id),
              el('dt', {}, 'Type'), el('dd', {}, ev.event_type),
              el('dt', {}, 'Created'), el('dd', {}, timeNode(ev.created_at, { full: true })),
              ev.endpoint_id !== null && ev.endpoint_id !== undefined
                ? [el('dt', {}, 'Routed directly to'), el('dd', {}, el('a', { href: endpointHref(ev.endpoint_id) }, 'endpoint ' + ev.endpoint_id))]
                : null)
              : el('p', { class: 'warn-box', id: 'event-gone' }, 'The outbox row of this event is gone (retention): what is left is below. ' +
                'It cannot be resent: walhook sends the event from its outbox row.')),
          r.note ? el('p', { class: 'muted note', id: 'event-note' }, r.note) : null,
          section('Endpoints', 'event-endpoints', rows.length === 0
            ? el('p', { class: 'muted' }, 'No endpoint: the event routes nowhere, and no delivery or recent attempt mentions it.')
            : el('div', { class: 'table-wrap' }, el('table', { class: 'data', id: 'event-table' },
              el('thead', {}, el('tr', {}, ['Endpoint', 'URL', 'Verdict', 'Attempts', 'When', 'Last status', 'Last error', 'Attempts in memory', '']
                .map((h, i) => el('th', { scope: 'col', class: i === 3 ? 'num' : null }, h || el('span', { class: 'sr-only' }, 'Actions'))))),
              el('tbody', {}, rows.map((x) => {
                const d = x.delivery || null;
                const outcomes = x.recent_outcomes || [];
                const attempts = d ? d.attempts : outcomes.length ? Math.max(...outcomes.map((o) => o.attempt || 0)) : null;
                const newest = outcomes.length ? outcomes[outcomes.length - 1] : null;  // oldest first
                const when = d ? (d.delivered_at || d.last_attempt_at || d.created_at) : newest ? newest.at : null;
                const endpoint = { id: x.endpoint_id, url: x.url };
                return el('tr', { dataset: { endpointId: x.endpoint_id } },
                  el('td', {}, el('a', { href: endpointHref(x.endpoint_id) }, String(x.endpoint_id))),
                  el('td', {}, el('span', { class: 'url', title: x.url }, shortUrl(x.url)),
                    x.routed === false ? el('div', { class: 'muted small-text', title: x.routed_reason || null }, 'not routed now') : null),
                  // The reason inline, not only on hover: an inferred verdict says from what.
                  el('td', { class: 'verdict' }, statusBadge(x.verdict || 'unknown', x.reason || x.routed_reason || null),
                    x.reason ? el('div', { class: 'muted small-text verdict-reason' }, x.reason) : null),
                  el('td', { class: 'num' }, numNode(attempts)),
                  el('td', {}, timeNode(when)),
                  el('td', { class: 'num' }, httpStatusNode(d ? d.last_status : newest ? newest.http_status : null)),
                  el('td', {}, errorText(d ? d.last_error : null)),
                  el('td', {}, outcomeSummary(outcomes)),
                  // Without the outbox row the API answers 404: nothing to resend (said above the table).
                  el('td', {}, ev ? resendButton(endpoint, eventId, load) : null));
              }))))));
        document.title = 'Event ' + eventId + ' · walhook console';
        banner.replaceChildren();
      } catch (err) {
        if (gen !== state.generation) return;
        body.replaceChildren();
        banner.replaceChildren(errorBox(err.status === 404 ? new Error('No event ' + eventId + ': ' + err.message) : err, load));
      }
    }

    setMain(el('p', { class: 'crumbs' }, el('a', { href: '#/' }, '← Endpoints'), ' ',
      el('button', { type: 'button', class: 'link-button', onclick: () => load() }, 'Refresh')),
    lookupForm(), banner, body);
    load();
  }

  // ---------------------------------------------------------------- #/sources, #/sources/NAME

  function sourceHref(name) { return '#/sources/' + encodeURIComponent(name); }

  // A source's counters (GET /api/sources), as docs/inbox.md names them.
  const SOURCE_COUNTERS = [
    { key: 'received', label: 'Received', title: 'Events accepted: rows of walhook.inbox kept' },
    { key: 'duplicates', label: 'Duplicates', title: 'Repeats answered 2xx without a new row' },
    { key: 'key_reused', label: 'Key reuse', title: 'The same id with another body: refused with 409' },
    { key: 'deferred', label: 'Deferred', title: 'Waiting for a predecessor: the handler said "not yet"' },
    { key: 'quarantined', label: 'Quarantined', title: 'Dead deliveries to its destinations: replay them' },
  ];

  function sourceRowClass(s) {
    if ((s.quarantined || 0) > 0 || (s.key_reused || 0) > 0) return 'row-bad';
    if ((s.deferred || 0) > 0) return 'row-warn';
    return null;
  }

  function sourcesTable(list) {
    if (list.length === 0) {
      return el('p', { class: 'muted', id: 'sources-table' },
        'No inbox source yet: add one with `walhook inbox source add`, then run `walhook ingest`.');
    }
    return el('div', { class: 'table-wrap' }, el('table', { class: 'data', id: 'sources-table' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Source'), el('th', { scope: 'col' }, 'Scheme'),
        SOURCE_COUNTERS.map((c) => el('th', { scope: 'col', class: 'num', title: c.title }, c.label)),
        el('th', { scope: 'col' }, 'Last error'))),
      el('tbody', {}, list.map((s) => el('tr', { class: sourceRowClass(s), dataset: { source: s.name } },
        el('td', {}, el('a', { href: sourceHref(s.name) }, s.name)),
        el('td', {}, s.scheme),
        SOURCE_COUNTERS.map((c) => el('td', { class: 'num', dataset: { col: c.key } }, numNode(s[c.key]))),
        el('td', {}, errorText(s.last_error)))))));
  }

  function sourcesPage(gen) {
    const body = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
    const banner = el('div', {});
    const updated = el('span', { class: 'muted updated', 'aria-live': 'off' });

    async function load(background) {
      try {
        const r = await api('GET', '/api/sources');
        if (gen !== state.generation) return;
        body.replaceChildren(sourcesTable((r && r.sources) || []));
        banner.replaceChildren();
        updatedNote(updated);
      } catch (err) {
        if (gen !== state.generation) return;
        banner.replaceChildren(errorBox(background ? new Error('Refresh failed: ' + err.message) : err, () => load(false)));
      }
    }

    setMain(el('h1', {}, 'Inbox sources'),
      el('p', { class: 'muted' }, 'Senders whose webhooks `walhook ingest` accepts, dedupes and hands to their destinations in order.'),
      banner,
      el('section', { class: 'card', 'aria-labelledby': 'sources-title' },
        el('div', { class: 'card-head' }, el('h2', { id: 'sources-title' }, 'Sources'), updated), body));
    load(false).then(() => autoRefresh(gen, load));
  }

  function sourceSettings(s) {
    const row = (term, value) => [el('dt', {}, term), el('dd', {}, value === null || value === undefined || value === '' ? dash() : value)];
    const list = (a) => Array.isArray(a) && a.length ? a.join(', ') : null;
    const schedule = Array.isArray(s.retry_schedule_ms)
      ? s.retry_schedule_ms.map((ms) => fmtDuration(ms / 1000)).join(', ') + ', then quarantine' : null;
    return el('dl', { class: 'settings', id: 'source-settings' },
      row('Scheme', s.scheme),
      row('Event id from', s.id_from || 'the scheme\'s own'),
      row('Ordering key from', s.order_key_from || 'none: no order kept'),
      row('Timestamp tolerance', fmtDuration(s.tolerance_s)),
      row('"Not yet" statuses', list(s.defer_statuses)),
      row('Deferrals before quarantine', numNode(s.max_deferrals)),
      row('Retry schedule', schedule));
  }

  function destinationsTable(list, reload) {
    if (!list || list.length === 0) return el('p', { class: 'muted', id: 'destinations-table' }, 'None.');
    return el('div', { class: 'table-wrap' }, el('table', { class: 'data', id: 'destinations-table' },
      el('thead', {}, el('tr', {}, ['Endpoint', 'URL', 'Status', 'Pending', 'Owed', 'Quarantined', ''].map((h, i) =>
        el('th', { scope: 'col', class: [3, 4, 5].includes(i) ? 'num' : null,
          title: h === 'Owed' ? 'Events its outbox cursor still owes it (it fell behind)' : null },
        h || el('span', { class: 'sr-only' }, 'Actions'))))),
      el('tbody', {}, list.map((d) => el('tr', { dataset: { endpointId: d.endpoint_id } },
        el('td', {}, el('a', { href: endpointHref(d.endpoint_id) }, String(d.endpoint_id))),
        el('td', {}, el('span', { class: 'url', title: d.url }, shortUrl(d.url, 48))),
        el('td', {}, statusBadge(endpointStatus(d))),
        el('td', { class: 'num', dataset: { col: 'pending' } }, numNode(d.pending)),
        el('td', { class: 'num', dataset: { col: 'owed' } }, numNode(d.owed)),
        el('td', { class: 'num', dataset: { col: 'dead' } }, numNode(d.dead)),
        el('td', {}, el('button', {
          type: 'button', class: 'small', dataset: { action: 'replay' }, disabled: !d.dead,
          onclick: async () => {
            const acted = await confirmAction({
              title: 'Replay the quarantine?',
              what: 'The ' + plural(d.dead || 0, 'quarantined event', 'quarantined events') + ' of endpoint ' + d.endpoint_id +
                ' (' + d.url + ') go back on the normal path with fresh attempt and deferral counters, in order of their key.',
              button: 'Replay',
              run: () => api('POST', '/api/endpoints/' + encodeURIComponent(d.endpoint_id) + '/replay', {}),
              describe: describeReplay,
            });
            if (acted) reload();
          },
        }, 'Replay…')))))));
  }

  /** Destinations that hold their events back (the breaker's pause, a disable): said in words. */
  function heldDestinations(list) {
    const held = (list || []).filter((d) => d.paused_by_breaker || d.status !== 'active');
    if (held.length === 0) return null;
    return el('div', { class: 'warn-box', id: 'destinations-held' }, held.map((d) => el('p', {},
      el('a', { href: endpointHref(d.endpoint_id) }, 'Endpoint ' + d.endpoint_id), ' is ', endpointStatus(d),
      d.paused_until ? [' until ', timeNode(d.paused_until, { full: true })] : null,
      ': ' + plural((d.pending || 0) + (d.owed || 0), 'event waits', 'events wait') +
      ' for it, whatever the retry schedule says. Once its handler is fixed, Resume it on its page to send them now.')));
  }

  /** Quarantined or deferred deliveries of a source: the sender's id, the destination, why. */
  function sourceDeliveries(rows, destinations, reload, id, { resend, total }) {
    if (!rows || rows.length === 0) return el('p', { class: 'muted', id }, 'None.');
    const urls = new Map((destinations || []).map((d) => [d.endpoint_id, d.url]));
    return el('div', { class: 'table-wrap' },
      total > rows.length ? el('p', { class: 'muted hint', id: id + '-shown' },
        'The ' + rows.length + ' most recently changed of ' + total + ' are shown.') : null,
      el('table', { class: 'data', id },
      el('thead', {}, el('tr', {}, ['Sender\'s id', 'Type', 'Destination', 'Attempts', 'Deferrals', 'Last status', 'Last error',
        resend ? 'Since' : 'Next attempt', ''].map((h, i) =>
        el('th', { scope: 'col', class: [3, 4, 5].includes(i) ? 'num' : null }, h || el('span', { class: 'sr-only' }, 'Actions'))))),
      el('tbody', {}, rows.map((d) => el('tr', { dataset: { eventId: d.event_id, senderEventId: d.sender_event_id || '' } },
        el('td', {}, el('a', { href: eventHref(d.event_id), class: 'mono', title: 'walhook event ' + d.event_id }, d.sender_event_id || d.event_id)),
        el('td', {}, d.event_type || dash()),
        el('td', {}, el('a', { href: endpointHref(d.endpoint_id) }, 'endpoint ' + d.endpoint_id)),
        el('td', { class: 'num' }, numNode(d.attempts)),
        el('td', { class: 'num' }, numNode(d.deferrals)),
        el('td', { class: 'num' }, httpStatusNode(d.last_status)),
        el('td', {}, errorText(d.last_error)),
        el('td', {}, resend ? timeNode(d.last_attempt_at) : timeNode(d.next_attempt_at)),
        el('td', {}, resend ? resendButton({ id: d.endpoint_id, url: urls.get(d.endpoint_id) || '' }, d.event_id, reload) : null))))));
  }

  function keyReuseTable(rows) {
    if (!rows || rows.length === 0) return el('p', { class: 'muted', id: 'key-reuse-table' }, 'None.');
    return el('div', { class: 'table-wrap' }, el('table', { class: 'data', id: 'key-reuse-table' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Sender\'s id'), el('th', { scope: 'col' }, 'Received'))),
      el('tbody', {}, rows.map((k) => el('tr', {}, el('td', { class: 'mono' }, k.event_id), el('td', {}, timeNode(k.received_at)))))));
  }

  function sourcePage(gen, name) {
    const body = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
    const banner = el('div', {});
    const updated = el('span', { class: 'muted updated', 'aria-live': 'off' });
    let shown = false;

    async function load(background) {
      try {
        const s = await api('GET', '/api/sources/' + encodeURIComponent(name));
        if (gen !== state.generation) return;
        const reload = () => load(true);
        const scroll = window.scrollY;
        const stat = (c) => el('div', { class: 'stat', title: c.title, dataset: { counter: c.key } },
          el('div', { class: 'stat-label' }, c.label), el('div', { class: 'stat-value' }, numNode(s[c.key])));
        body.replaceChildren(
          el('div', { class: 'page-head' }, el('h1', {}, 'Inbox source ', el('span', { class: 'mono' }, s.name)),
            el('p', { class: 'mono' }, 'POST /in/' + s.name)),
          el('div', { class: 'stats', id: 'source-stats' }, SOURCE_COUNTERS.map(stat)),
          s.last_error ? el('div', { class: 'warn-box', id: 'source-last-error' }, el('strong', {}, 'Last error: '), s.last_error,
            s.last_error_at ? [' · ', timeNode(s.last_error_at)] : null) : null,
          heldDestinations(s.destinations),
          el('div', { class: 'columns' },
            section('Destinations', 'destinations', destinationsTable(s.destinations, reload)),
            section('Settings', 'source-settings-card', sourceSettings(s))),
          section('Quarantined', 'quarantined', el('p', { class: 'muted hint' },
            'Spent their retry schedule or their deferrals: replay a destination above, or resend one.'),
          sourceDeliveries(s.quarantined_deliveries, s.destinations, reload, 'quarantined-table', { resend: true, total: s.quarantined })),
          section('Deferred', 'deferred', el('p', { class: 'muted hint' }, 'Waiting for a predecessor: tried again soon.'),
            sourceDeliveries(s.deferred_deliveries, s.destinations, reload, 'deferred-table', { resend: false, total: s.deferred })),
          section('Reused ids', 'key-reuse', el('p', { class: 'muted hint' },
            'Ids sent again with another body, refused with 409: a sender bug or an attack.'), keyReuseTable(s.key_reuse)));
        if (background) window.scrollTo(0, scroll);
        if (!shown) document.title = 'Source ' + s.name + ' · walhook console';
        shown = true;
        banner.replaceChildren();
        updatedNote(updated);
      } catch (err) {
        if (gen !== state.generation) return;
        if (!shown) body.replaceChildren();
        banner.replaceChildren(errorBox(background ? new Error('Refresh failed: ' + err.message) : err, () => load(false)));
      }
    }

    setMain(el('p', { class: 'crumbs' }, el('a', { href: '#/sources' }, '← Inbox sources'), ' ', updated), banner, body);
    load(false).then(() => autoRefresh(gen, load));
  }

  // ---------------------------------------------------------------- routing

  function route() {
    clearTimeout(state.timer);
    const gen = ++state.generation;
    const path = location.hash.replace(/^#/, '') || '/';
    document.title = 'walhook console';
    $('nav-endpoints').setAttribute('aria-current', path === '/' ? 'page' : 'false');
    $('nav-sources').setAttribute('aria-current', path.startsWith('/sources') ? 'page' : 'false');
    let m;
    if (path === '/sources') return sourcesPage(gen);
    if ((m = /^\/sources\/([^/]+)$/.exec(path))) {
      let name;
      try { name = decodeURIComponent(m[1]); } catch (e) { name = m[1]; }
      return sourcePage(gen, name);
    }
    if ((m = /^\/endpoints\/(\d+)$/.exec(path))) return endpointPage(gen, m[1]);
    if ((m = /^\/events\/([^/]+)$/.exec(path))) {
      let id;
      try { id = decodeURIComponent(m[1]); } catch (e) { id = m[1]; }
      return eventPage(gen, id);
    }
    if (path === '/' || path === '/endpoints') return endpointsPage(gen);
    setMain(el('h1', {}, 'Not found'), el('p', {}, 'No page ', el('code', {}, path), '. ', el('a', { href: '#/' }, 'Endpoints')));
  }

  function start() {
    $('token-button').addEventListener('click', () => { askToken(null).then((saved) => { if (saved) route(); }); });
    $('token-cancel').addEventListener('click', () => $('token-dialog').close('cancel'));
    updateSignIn();
    window.addEventListener('hashchange', () => { route(); $('main').focus({ preventScroll: true }); window.scrollTo(0, 0); });
    route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
