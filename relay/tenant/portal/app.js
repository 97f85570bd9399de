// walhook tenant portal (docs/tenant-api.md, "The portal"). Everything is rendered from /v1/ with
// DOM nodes and textContent, never HTML built from data. The session is an HttpOnly cookie set
// by POST /portal/session; every request also carries the session's CSRF token (X-CSRF-Token),
// kept in this tab's sessionStorage.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { endpoints: [], cursor: null };

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  const { dataset, ...rest } = props || {};
  Object.assign(node, rest);
  Object.assign(node.dataset, dataset || {});
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? '' : String(c)));
  return node;
}

function say(text, error) {
  const m = $('message');
  m.textContent = text;
  m.classList.toggle('error', !!error);
}

/// A request to the tenant API with the session's CSRF token; the JSON answer or an Error.
async function api(method, path, body) {
  const headers = { 'X-CSRF-Token': sessionStorage.getItem('walhook.csrf') || '' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => ({}));
  if (res.status === 401) {
    signedOut('Your session has ended: ask for a new link.');
    throw new Error('signed out');
  }
  if (!res.ok) throw new Error(json.error || ('HTTP ' + res.status));
  return json;
}

function signedOut(text) {
  sessionStorage.removeItem('walhook.csrf');
  for (const id of ['endpoints-section', 'deliveries-section', 'events-section']) $(id).hidden = true;
  $('sign-out').hidden = true;
  $('session-info').textContent = '';
  say(text, true);
}

/// Runs `action` and reports its error in the message line.
async function attempt(action) {
  try {
    await action();
  } catch (e) {
    if (e.message !== 'signed out') say(e.message, true);
  }
}

/// A button that asks once more before it acts ("Confirm …" for 5 s): no blocking dialogs.
function confirmButton(label, confirmLabel, action) {
  const b = el('button', { type: 'button', textContent: label });
  let armed = null;
  b.addEventListener('click', () => {
    if (!armed) {
      b.textContent = confirmLabel;
      b.classList.add('primary');
      armed = setTimeout(() => { armed = null; b.textContent = label; b.classList.remove('primary'); }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    b.textContent = label;
    b.classList.remove('primary');
    attempt(action);
  });
  return b;
}

function button(label, action) {
  const b = el('button', { type: 'button', textContent: label });
  b.addEventListener('click', () => attempt(action));
  return b;
}

function showSecret(endpointId, secret) {
  $('secret-endpoint').textContent = endpointId;
  $('secret').textContent = secret;
  $('secret-box').hidden = false;
}

function health(e) {
  const h = e.health;
  if (e.status !== 'active') return el('span', { className: 'pill off', textContent: e.status });
  if (h.circuit_open) return el('span', { className: 'pill bad', textContent: 'failing, paused by the breaker' });
  if (h.consecutive_failures > 0) return el('span', { className: 'pill bad', textContent: h.consecutive_failures + ' failures in a row' });
  return el('span', { className: 'pill ok', textContent: 'healthy' });
}

async function loadEndpoints() {
  const answer = await api('GET', '/v1/endpoints');
  state.endpoints = answer.data;
  const body = $('endpoints').tBodies[0];
  body.replaceChildren();
  for (const e of answer.data) {
    const actions = el('td', {},
      button('Deliveries', () => loadDeliveries(e.id)),
      button('Send test', async () => { await api('POST', '/v1/endpoints/' + e.id + '/test'); say('A test event is on its way to endpoint ' + e.id + '.'); }),
      confirmButton('Rotate secret', 'Confirm rotation', async () => {
        const r = await api('POST', '/v1/endpoints/' + e.id + '/rotate-secret', {});
        showSecret(e.id, r.secret);
        say('Endpoint ' + e.id + ' has a new secret; the old one signs too until ' + (r.old_secrets_valid_until || 'now') + '.');
      }),
      e.status === 'paused'
        ? button('Resume', async () => { await api('POST', '/v1/endpoints/' + e.id + '/resume'); say('Endpoint ' + e.id + ' resumed.'); await loadEndpoints(); })
        : button('Pause', async () => { await api('POST', '/v1/endpoints/' + e.id + '/pause'); say('Endpoint ' + e.id + ' paused.'); await loadEndpoints(); }),
      confirmButton('Delete', 'Confirm delete', async () => {
        await api('DELETE', '/v1/endpoints/' + e.id);
        say('Endpoint ' + e.id + ' deleted.');
        await loadEndpoints();
      }));
    const types = e.event_types ? e.event_types.join(', ') : 'all event types';
    body.append(el('tr', { dataset: { endpoint: e.id } },
      el('td', {}, el('div', { className: 'mono', textContent: e.url }), el('div', { className: 'muted', textContent: '#' + e.id + ' · ' + types })),
      el('td', {}, e.status),
      el('td', {}, health(e), el('div', { className: 'muted', textContent: e.health.open_deliveries + ' open · ' + e.health.dead_letters + ' dead' })),
      el('td', {}, e.health.last_error || ''),
      actions));
  }
  if (!answer.data.length) body.append(el('tr', {}, el('td', { colSpan: 5, className: 'muted', textContent: 'No endpoints yet.' })));
  const select = $('resend-to');
  const chosen = select.value;
  select.replaceChildren(...answer.data.map((e) => el('option', { value: e.id, textContent: '#' + e.id + ' ' + e.url })));
  if (chosen) select.value = chosen;
}

async function loadDeliveries(id) {
  const answer = await api('GET', '/v1/endpoints/' + id + '/deliveries?limit=50');
  $('deliveries-endpoint').textContent = id;
  const body = $('deliveries').tBodies[0];
  body.replaceChildren();
  for (const d of answer.data) {
    body.append(el('tr', {},
      el('td', { className: 'mono', textContent: d.event_id }), el('td', {}, d.event_type || ''),
      el('td', {}, d.status), el('td', {}, d.attempts), el('td', {}, d.last_status == null ? '' : d.last_status),
      el('td', {}, d.last_error || ''), el('td', {}, d.next_attempt_at || ''),
      el('td', {}, button('Resend', () => resend(id, d.event_id)))));
  }
  if (!answer.data.length) body.append(el('tr', {}, el('td', { colSpan: 8, className: 'muted', textContent: 'No deliveries that needed more than one attempt.' })));
  $('deliveries-section').hidden = false;
}

async function resend(endpointId, eventId) {
  await api('POST', '/v1/endpoints/' + endpointId + '/resend', { event_id: eventId });
  say('Event ' + eventId + ' is being sent again to endpoint ' + endpointId + '.');
}

/// A datetime-local value (read as UTC) as RFC 3339, or null.
function utc(value) {
  if (!value) return null;
  return (value.length === 16 ? value + ':00' : value) + 'Z';
}

async function loadEvents(more) {
  const params = new URLSearchParams({ limit: '50' });
  const since = utc($('since').value);
  const until = utc($('until').value);
  if (since) params.set('since', since);
  if (until) params.set('until', until);
  if (more && state.cursor) params.set('cursor', state.cursor);
  const answer = await api('GET', '/v1/events?' + params.toString());
  const body = $('events').tBodies[0];
  if (!more) body.replaceChildren();
  for (const ev of answer.data) {
    body.append(el('tr', { dataset: { event: ev.id } },
      el('td', {}, ev.timestamp), el('td', {}, ev.type), el('td', { className: 'mono', textContent: ev.id }),
      el('td', { className: 'data', textContent: JSON.stringify(ev.data) }),
      el('td', {}, button('Resend', () => {
        const to = $('resend-to').value;
        if (!to) throw new Error('Add an endpoint first.');
        return resend(to, ev.id);
      }))));
  }
  if (!more && !answer.data.length) body.append(el('tr', {}, el('td', { colSpan: 5, className: 'muted', textContent: 'No events in this range.' })));
  state.cursor = answer.next_cursor;
  $('more-events').hidden = !state.cursor;
}

async function addEndpoint(event) {
  event.preventDefault();
  const types = $('new-types').value.split(',').map((t) => t.trim()).filter((t) => t && t !== 'all');
  const created = await api('POST', '/v1/endpoints', { url: $('new-url').value.trim(), event_types: types });
  showSecret(created.id, created.secret);
  say('Endpoint ' + created.id + ' added.');
  $('add-endpoint').reset();
  await loadEndpoints();
}

async function signIn() {
  // The one-time code travels in the fragment (never sent to a server, nor in a Referer) and is
  // removed from the address before anything else.
  const code = new URLSearchParams(location.hash.slice(1)).get('code');
  if (code) {
    history.replaceState(null, '', location.pathname);
    const res = await fetch('/portal/session', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code }),
    });
    const json = await res.json().catch(() => ({}));
    if (!res.ok) { signedOut('This link is no longer valid (used or expired): ask for a new one.'); return false; }
    sessionStorage.setItem('walhook.csrf', json.csrf);
    sessionStorage.setItem('walhook.tenant', json.tenant);
    sessionStorage.setItem('walhook.expires', json.expires_at);
  }
  if (!sessionStorage.getItem('walhook.csrf')) { signedOut('Open the portal with the link you were given.'); return false; }
  $('tenant').textContent = sessionStorage.getItem('walhook.tenant') || '';
  $('session-info').textContent = 'session until ' + (sessionStorage.getItem('walhook.expires') || '').replace('T', ' ').slice(0, 19) + ' UTC';
  $('sign-out').hidden = false;
  return true;
}

async function main() {
  $('add-endpoint').addEventListener('submit', (e) => attempt(() => addEndpoint(e)));
  $('events-form').addEventListener('submit', (e) => { e.preventDefault(); attempt(() => loadEvents(false)); });
  $('more-events').addEventListener('click', () => attempt(() => loadEvents(true)));
  $('sign-out').addEventListener('click', () => attempt(async () => {
    await api('POST', '/portal/logout');
    signedOut('Signed out.');
  }));
  if (!(await signIn())) return;
  $('endpoints-section').hidden = false;
  $('events-section').hidden = false;
  await attempt(async () => { await loadEndpoints(); await loadEvents(false); });
  document.body.dataset.ready = 'true';
}

main();
