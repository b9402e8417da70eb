// Flowgate's dashboard: changing the rules from the page. Every change (a trial limit tried,
// promoted or dropped, an edit sent, a rollback) is first shown as a diff of what it changes,
// and sent only once confirmed. A change reads the rules (`GET /v1/rules`, the whole document:
// rules, queues, alerts, breakers), changes them, and sends them back (`PUT /v1/rules`): one
// versioned change on a cluster that shares its rules through Redis.

import { $, el, setText, clear, api, describe, clock, token } from "./format.js";

// What `GET /v1/rules` adds to the document, which a change ignores.
const READ_ONLY = new Set(["version", "source", "follows", "files", "author", "changed_at", "in_sync", "problem"]);
const ENTRY_READ_ONLY = new Set(["in_force", "next_change"]);
// The document's lists, whose entries are named.
const LISTS = ["rule", "queue", "alert", "breaker"];
// What a URL shown without the admin token holds in place of its secrets.
const REDACTED = "<redacted>";

// JSON with its keys sorted: two values are the same when these are.
function canon(v) {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  }
  return JSON.stringify(v === undefined ? null : v);
}

// What changes from document `a` to document `b`, entry by entry and field by field: lines
// `{sign, text}` with sign `+` (added), `-` (removed) or `~` (changed).
export function docDiff(a, b) {
  const out = [];
  const keys = new Set(Object.keys(a || {}).concat(Object.keys(b || {})));
  for (const k of keys) {
    if (READ_ONLY.has(k) || LISTS.includes(k)) continue;
    fieldDiff(out, k, (a || {})[k], (b || {})[k]);
  }
  for (const list of LISTS) {
    const id = (doc, x) => list + " " + (x.domain || doc.domain || "") + "/" + x.name;
    const before = new Map(((a || {})[list] || []).map((x) => [id(a, x), x]));
    const after = new Map(((b || {})[list] || []).map((x) => [id(b, x), x]));
    for (const [name, x] of before) if (!after.has(name)) out.push({ sign: "-", text: name + " " + show(strip(x)) });
    for (const [name, x] of after) {
      const old = before.get(name);
      if (!old) {
        out.push({ sign: "+", text: name + " " + show(strip(x)) });
        continue;
      }
      const fields = new Set(Object.keys(old).concat(Object.keys(x)));
      for (const f of fields) if (!ENTRY_READ_ONLY.has(f)) fieldDiff(out, name + ": " + f, old[f], x[f]);
    }
  }
  return out;
}

function strip(x) {
  const y = Object.assign({}, x);
  for (const f of ENTRY_READ_ONLY) delete y[f];
  return y;
}

function show(v) {
  return typeof v === "string" ? JSON.stringify(v) : canon(v);
}

function fieldDiff(out, what, x, y) {
  if (canon(x) === canon(y)) return;
  if (x === undefined) out.push({ sign: "+", text: what + " = " + show(y) });
  else if (y === undefined) out.push({ sign: "-", text: what + " = " + show(x) });
  else out.push({ sign: "~", text: what + ": " + show(x) + " → " + show(y) });
}

// The lines that differ between texts `a` and `b` (a longest common subsequence), with two
// lines of context; null when the texts are too long to compare here.
export function lineDiff(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  if (n * m > 4e6) return null;
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] = x[i] === y[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const all = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) all.push({ sign: " ", text: x[i++] }), j++;
    else if (j < m && (i === n || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) all.push({ sign: "+", text: y[j++] });
    else all.push({ sign: "-", text: x[i++] });
  }
  const near = (k) => all.slice(Math.max(0, k - 2), k + 3).some((l) => l.sign !== " ");
  const out = [];
  all.forEach((l, k) => {
    if (l.sign !== " " || near(k)) out.push(l);
    else if (out.length && out[out.length - 1].text !== "…") out.push({ sign: " ", text: "…" });
  });
  return out.some((l) => l.sign !== " ") ? out : [];
}

// ---- the confirmation --------------------------------------------------------------------

// Shows `title`, `note` and the diff `lines`, and resolves to whether the change is to be sent.
function confirmChange(title, note, lines) {
  const dialog = $("confirm");
  setText($("confirm-title"), title);
  setText($("confirm-note"), note);
  const pre = $("confirm-diff");
  clear(pre);
  for (const l of lines) {
    const cls = l.sign === "+" ? "diff-add" : l.sign === "-" ? "diff-del" : l.sign === "~" ? "diff-change" : "";
    pre.append(el("span", { class: cls, text: l.sign + " " + l.text + "\n" }));
  }
  return new Promise((resolve) => {
    const done = (yes) => {
      dialog.onclose = null;
      for (const b of dialog.querySelectorAll("button")) b.onclick = null;
      if (dialog.open) dialog.close();
      resolve(yes);
    };
    dialog.querySelector("[data-action=apply]").onclick = () => done(true);
    dialog.querySelector("[data-action=cancel]").onclick = () => done(false);
    dialog.onclose = () => done(false); // Escape
    dialog.showModal();
  });
}

function whereNote(doc) {
  return doc && doc.follows === "redis"
    ? "Confirming stores a new version of the rules shared through Redis: in force on every node within a second."
    : "Confirming replaces this node's rules until its configuration files change.";
}

// Sends document `after` (read as `before`) with `PUT /v1/rules` once its diff is confirmed.
async function applyDoc(title, before, after) {
  const lines = docDiff(before, after);
  if (!lines.length) return { ok: false, status: 0, json: { error: "unchanged", detail: "these are the rules in force: nothing to send" } };
  if (!(await confirmChange(title, whereNote(before), lines))) return { ok: false, cancelled: true, status: 0, json: { error: "cancelled", detail: "nothing was sent" } };
  return api("PUT", "v1/rules", JSON.stringify(after), "application/json");
}

// The rules read again, `change` applied to rule `domain`/`name`, sent back once confirmed.
async function editRule(domain, name, title, change) {
  const g = await api("GET", "v1/rules");
  if (!g.ok || !g.json) return g;
  const before = g.json;
  const after = JSON.parse(JSON.stringify(before));
  const rule = (after.rule || []).find((x) => (x.domain || after.domain) === domain && x.name === name);
  if (!rule) return { ok: false, status: 0, json: { error: "not_found", detail: "rule " + domain + "/" + name + " is not in force" } };
  try {
    change(rule);
  } catch (e) {
    return { ok: false, status: 0, json: { error: "refused", detail: String(e.message || e) } };
  }
  return applyDoc(title + " (" + domain + "/" + name + ")", before, after);
}

// ---- trying a limit ----------------------------------------------------------------------

export function makeTrial(r) {
  const limit = el("input", { type: "number", min: 0, step: 1, name: "limit", "aria-label": "trial limit", placeholder: "limit" });
  const window_ = el("input", { type: "text", name: "window", value: "1s", "aria-label": "trial window", size: 5 });
  const tryButton = el("button", { type: "submit", "data-action": "try", text: "Try in shadow" });
  const form = el("form", { "data-form": "trial" }, [el("span", { text: "Try a limit:" }), limit, el("span", { text: "per" }), window_, tryButton]);
  const promote = el("button", { type: "button", "data-action": "promote", text: "Promote" });
  const drop = el("button", { type: "button", "data-action": "drop", text: "Drop" });
  const actions = el("div", { class: "buttons" }, [promote, drop]);
  const result = el("p", { class: "result muted", "data-f": "trial-result" });
  const box = el("div", { class: "trial" }, [form, actions, result]);
  const domain = r.domain;
  const name = r.name;

  const run = async (what, title, change) => {
    setText(result, what + "…");
    const out = await editRule(domain, name, title, change);
    setText(result, out.ok ? what + ": version " + out.json.version + " in force" : out.cancelled ? what + ": cancelled, nothing changed" : what + " refused: " + describe(out));
    result.classList.toggle("muted", out.ok || !!out.cancelled);
    if (out.ok) afterChange();
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const n = Number(limit.value);
    if (!limit.value || !Number.isInteger(n) || n < 0) {
      setText(result, "the trial limit is a whole number of requests");
      return;
    }
    const w = window_.value.trim() || "1s";
    run("trial " + n + " per " + w, "Try " + n + " per " + w + " in shadow", (rule) => {
      rule.trial = { limit: n, window: w };
    });
  });
  promote.addEventListener("click", () =>
    run("promoted", "Promote the trial to the rule's limit", (rule) => {
      const t = rule.trial;
      if (!t) throw new Error("this rule has no trial");
      // The trial's own fields become the rule's; those it leaves out (algorithm, burst) it
      // took from the rule, which keeps them. A count without a window is per second.
      for (const f of ["limit", "window", "algorithm", "burst"]) if (t[f] !== undefined) rule[f] = t[f];
      if (t.window === undefined) delete rule.window;
      delete rule.unlimited;
      delete rule.trial;
    }),
  );
  drop.addEventListener("click", () =>
    run("dropped", "Drop the trial", (rule) => {
      delete rule.trial;
    }),
  );
  return { box, form, actions };
}

export function renderTrial(t, r) {
  t.box.hidden = !!r.shadow;
  t.actions.hidden = !r.trial;
}

// ---- rules in force: history, diff, rollback, editor -------------------------------------

let historySig = null;
let current = null; // the version in force, as the history last said
let editorLoaded = null; // the editor's text as last loaded

export async function loadHistory() {
  const note = $("history-note");
  const table = $("history");
  const tbody = table.tBodies[0];
  if (!token()) {
    // Versions are the admin API's: not asked for without a token.
    clear(tbody);
    table.hidden = true;
    setText(note, "Enter the admin token above to see the recent versions, their authors and diffs.");
    note.dataset.error = "no_token";
    historySig = null;
    return;
  }
  const r = await api("GET", "v1/rules/history?limit=20");
  // The same answer as shown: the rows (and the buttons someone may be pressing) stay.
  const sig = r.status + " " + r.text;
  if (sig === historySig) return;
  historySig = sig;
  clear(tbody);
  if (!r.ok) {
    table.hidden = true;
    if (r.status === 409 && r.json && r.json.error === "follows_files") {
      setText(note, "This node follows its configuration files, which keep no versions: " + r.json.detail);
    } else if (r.status === 401 || r.status === 403) {
      setText(note, "The recent versions need the admin token (" + describe(r) + ").");
    } else {
      setText(note, "The recent versions cannot be read: " + describe(r));
    }
    note.dataset.error = (r.json && r.json.error) || String(r.status);
    return;
  }
  table.hidden = false;
  delete note.dataset.error;
  current = r.json.current;
  setText(note, "Version " + current + " is in force.");
  for (const v of r.json.versions || []) {
    const diff = el("button", { type: "button", "data-action": "diff", text: "diff" });
    diff.addEventListener("click", () => showVersion(v.version));
    const cells = [diff];
    if (v.version !== current) {
      const back = el("button", { type: "button", "data-action": "rollback", text: "roll back to " + v.version });
      back.addEventListener("click", () => rollback(v.version));
      cells.push(back);
    }
    tbody.append(el("tr", { "data-version": v.version }, [
      el("td", { class: "num", "data-label": "version", text: v.version }),
      el("td", { "data-label": "author", text: v.author }),
      el("td", { "data-label": "at", text: clock(Date.parse(v.at)) }),
      el("td", { "data-label": "action", text: v.action }),
      el("td", { class: "desc", "data-label": "summary", text: v.summary }),
      el("td", { class: "buttons" }, cells),
    ]));
  }
}

async function showVersion(n) {
  const pre = $("diff");
  const r = await api("GET", "v1/rules/versions/" + n);
  clear(pre);
  pre.hidden = false;
  pre.classList.toggle("error", !r.ok);
  if (!r.ok) {
    setText(pre, describe(r));
    return;
  }
  const text = typeof r.json.diff === "string" ? r.json.diff : JSON.stringify(r.json.diff, null, 2);
  pre.append(el("strong", { text: "version " + n + " (" + r.json.author + ", " + clock(Date.parse(r.json.at)) + ")\n" }));
  for (const line of (text || "(no change)").split("\n")) {
    const cls = line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del" : "";
    pre.append(el("span", { class: cls, text: line + "\n" }));
  }
}

// The files of version `to` against those of version `from`, line by line.
async function versionsDiff(from, to) {
  const [a, b] = await Promise.all([api("GET", "v1/rules/versions/" + from), api("GET", "v1/rules/versions/" + to)]);
  if (!a.ok || !b.ok) return [{ sign: " ", text: "the versions cannot be compared: " + describe(a.ok ? b : a) }];
  const files = (r) => new Map((r.json.files || []).map((f) => [f.name, f.text]));
  const before = files(a);
  const after = files(b);
  const out = [];
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const d = lineDiff(before.get(name) || "", after.get(name) || "");
    if (d && !d.length) continue;
    out.push({ sign: " ", text: "── " + name + (before.has(name) ? "" : " (added)") + (after.has(name) ? "" : " (removed)") });
    out.push(...(d || [{ sign: "~", text: "(too long to compare here)" }]));
  }
  return out;
}

async function rollback(n) {
  const from = current;
  const lines = from === null ? [] : await versionsDiff(from, n);
  const title = "Roll back to version " + n + (from === null ? "" : " (from version " + from + ")");
  if (!(await confirmChange(title, whereNote({ follows: "redis" }), lines))) {
    showResult({ ok: false, status: 0, json: { error: "cancelled", detail: "nothing was sent" } }, "rollback cancelled");
    return;
  }
  const out = await api("POST", "v1/rules/rollback", JSON.stringify({ version: n }), "application/json");
  showResult(out, out.ok ? "rolled back to version " + n + ": version " + out.json.version + " in force" : "rollback refused");
  if (out.ok) afterChange();
}

// Loads the rules into the editor; `info(doc)` is given them too.
export async function loadEditor(info) {
  const r = await api("GET", "v1/rules");
  if (!r.ok || !r.json) {
    showResult(r, "the rules cannot be read");
    return;
  }
  const text = JSON.stringify(r.json, null, 2);
  $("editor").value = text;
  editorLoaded = text;
  const redacted = text.includes(REDACTED);
  $("editor-note").hidden = !redacted;
  if (info) info(r.json);
}

function showResult(r, what) {
  const pre = $("edit-result");
  pre.hidden = false;
  pre.classList.toggle("error", !r.ok);
  pre.dataset.status = String(r.status);
  setText(pre, what + (r.status ? " (HTTP " + r.status + ")" : "") + "\n" + (r.json ? JSON.stringify(r.json, null, 2) : r.text || ""));
}

export async function sendEditor() {
  let doc;
  try {
    doc = JSON.parse($("editor").value);
  } catch (e) {
    showResult({ ok: false, status: 0, json: { error: "bad_json", detail: String(e.message || e) } }, "not sent");
    return;
  }
  const g = await api("GET", "v1/rules");
  if (!g.ok || !g.json) {
    showResult(g, "the rules in force cannot be read");
    return;
  }
  const out = await applyDoc("Send the edited rules", g.json, doc);
  showResult(out, out.ok ? "version " + out.json.version + " in force" : out.cancelled ? "cancelled" : "refused");
  if (out.ok) afterChange();
}

function afterChange() {
  loadHistory();
  // The editor follows the rules in force unless someone is editing it.
  if ($("editor").value === editorLoaded) loadEditor();
}
