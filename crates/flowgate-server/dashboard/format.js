// Flowgate's dashboard: what every part of the page uses. The DOM is built with createElement
// and textContent only (the page's Content-Security-Policy refuses HTML sinks): descriptors are
// clients' text. Times are shown on one 24-hour clock, in the browser's time zone.

// ---- DOM ---------------------------------------------------------------------------------

export const $ = (id) => document.getElementById(id);

// An element: `attrs` sets `class`, `text`, `data-*`, `type` and other attributes.
export function el(tag, attrs, children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = String(v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children || []) e.append(c);
  return e;
}

export function setText(node, text) {
  const t = text === undefined || text === null ? "" : String(text);
  if (node.textContent !== t) node.textContent = t;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Where a key (a descriptor, a queue instance, a breaker key) may break across lines: after its
// separators, never inside a key or a value.
const BREAK_AFTER = /([,:;/&|\s])/;

// `node`'s text again, with a line-break opportunity (<wbr>) after each separator.
export function breakable(node, text) {
  clear(node);
  for (const part of String(text).split(BREAK_AFTER)) {
    if (!part) continue;
    node.append(part);
    if (BREAK_AFTER.test(part)) node.append(el("wbr"));
  }
  return node;
}

// A table cell holding a key: monospace, broken only after its separators.
export function keyCell(text, cls) {
  const td = el("td", { class: "key mono" + (cls ? " " + cls : "") });
  td.dataset.key = String(text);
  return breakable(td, text);
}

// ---- formatting --------------------------------------------------------------------------

export function fmtRate(x) {
  if (x === undefined || x === null || !isFinite(x)) return "–";
  if (x >= 100) return x.toFixed(0);
  if (x >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

export function fmtPct(r) {
  if (r === undefined || r === null || !isFinite(r)) return "–";
  const p = r * 100;
  return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + " %";
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null) return "–";
  return (ms < 10 ? ms.toFixed(2) : ms.toFixed(1)) + " ms";
}

export function fmtSecs(s) {
  if (s === undefined || s === null || !isFinite(s)) return "–";
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

// A count on a chart's axis, short: 950, 1.2k, 12k, 1.2M.
export function fmtCount(n) {
  const a = Math.abs(n);
  const short = (x, unit) => (x < 10 ? String(Math.round(x * 10) / 10) : String(Math.round(x))) + unit;
  if (a >= 1e9) return short(n / 1e9, "G");
  if (a >= 1e6) return short(n / 1e6, "M");
  if (a >= 1e3) return short(n / 1e3, "k");
  return String(Math.round(n * 100) / 100);
}

const two = (n) => String(n).padStart(2, "0");

// The clock of the page, 24 hours: `14:03:07` today, `2026-11-27 14:03:07` another day.
export function clock(ms) {
  if (ms === undefined || ms === null || !isFinite(ms)) return "–";
  const d = new Date(ms);
  const hms = two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  if (d.toDateString() === new Date().toDateString()) return hms;
  return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " + hms;
}

// A chart's tick: `14:03`, with seconds where a tick falls within a minute.
export function tick(t) {
  const d = new Date(t * 1000);
  const hm = two(d.getHours()) + ":" + two(d.getMinutes());
  return d.getSeconds() ? hm + ":" + two(d.getSeconds()) : hm;
}

// ---- the token and the API ---------------------------------------------------------------

const TOKEN_KEY = "flowgate.token";
let memoryToken = "";

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || memoryToken;
  } catch (_) {
    return memoryToken;
  }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch (_) {
    // Storage refused (a private window's policy): the token lasts until the page closes.
  }
  memoryToken = t;
}

export function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

// One request: its status, whether it succeeded, and its body as JSON (or text).
export async function api(method, path, body, contentType) {
  const init = { method, headers: headers(contentType ? { "Content-Type": contentType } : {}), cache: "no-store" };
  if (body !== undefined) init.body = body;
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    return { status: 0, ok: false, json: { error: "network", detail: String(e) }, text: String(e) };
  }
  const text = await resp.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (_) {
    json = null;
  }
  return { status: resp.status, ok: resp.ok, json, text };
}

export function describe(r) {
  if (r.json && r.json.error) return r.json.error + ": " + (r.json.detail || "");
  return "HTTP " + r.status + (r.text ? ": " + r.text.slice(0, 300) : "");
}
