// Flowgate's dashboard.
//
// It reads the JSON that scripts read too: `GET /v1/stats?window=900` once (15 minutes of
// per-second series), then `GET /v1/stats/stream?window=1`, Server-Sent Events named `stats`,
// each carrying the newest second, which is appended to the charts. The stream is read with
// fetch() rather than EventSource because EventSource cannot send an `Authorization` header, and
// a server started with --dashboard-token wants one. On any error it reconnects (with backoff),
// and reloads the whole window first, so missed seconds are filled.
//
// The DOM is built with createElement and textContent only (the page's Content-Security-Policy
// refuses HTML sinks): descriptors are clients' text.
(function () {
  "use strict";

  // Errors, collected for the problem line and for the browser tests.
  const errors = [];
  window.flowgateErrors = errors;
  window.addEventListener("error", (e) => {
    const t = e.target;
    const what = e.message || (t && (t.src || t.href)) || "an error";
    errors.push(String(what));
  }, true);
  window.addEventListener("unhandledrejection", (e) => {
    errors.push("unhandled rejection: " + String(e.reason));
  });
  document.addEventListener("securitypolicyviolation", (e) => {
    errors.push("CSP violation: " + e.violatedDirective + " " + e.blockedURI);
  });

  // Seconds of history: 15 minutes, or fewer with `?window=N` in the page's address (10 to 900).
  const WINDOW = (() => {
    const w = Number(new URLSearchParams(location.search).get("window"));
    return Number.isInteger(w) && w >= 10 && w <= 900 ? w : 900;
  })();
  const HIGH_RATIO = 0.6; // a rejection ratio above this is highlighted
  const TOKEN_KEY = "flowgate.token";
  const STALL_MS = 10000; // a stream silent this long is reconnected

  // ---- DOM helpers -------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  // An element: `attrs` sets `class`, `text`, `data-*`, `type` and other attributes.
  function el(tag, attrs, children) {
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

  function setText(node, text) {
    const t = text === undefined || text === null ? "" : String(text);
    if (node.textContent !== t) node.textContent = t;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // ---- formatting --------------------------------------------------------------------------

  function fmtRate(x) {
    if (x === undefined || x === null || !isFinite(x)) return "–";
    if (x >= 100) return x.toFixed(0);
    if (x >= 10) return x.toFixed(1);
    return x.toFixed(2);
  }

  function fmtPct(r) {
    if (r === undefined || r === null || !isFinite(r)) return "–";
    const p = r * 100;
    return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + " %";
  }

  function fmtMs(ms) {
    if (ms === undefined || ms === null) return "–";
    return (ms < 10 ? ms.toFixed(2) : ms.toFixed(1)) + " ms";
  }

  function fmtSecs(s) {
    if (s === undefined || s === null || !isFinite(s)) return "–";
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    if (s < 3600) return (s / 60).toFixed(1) + " min";
    if (s < 86400) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }

  function fmtTime(ms) {
    if (ms === undefined || ms === null) return "–";
    const d = new Date(ms);
    const today = new Date();
    return d.toDateString() === today.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }

  // ---- the token and the API ---------------------------------------------------------------

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (_) {
      return "";
    }
  }

  function setToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) {
      // Storage refused (a private window's policy): the token lasts until the page closes.
    }
    memoryToken = t;
  }
  let memoryToken = "";

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token() || memoryToken;
    if (t) h.Authorization = "Bearer " + t;
    return h;
  }

  // One request: its status, whether it succeeded, and its body as JSON (or text).
  async function api(method, path, body, contentType) {
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

  function describe(r) {
    if (r.json && r.json.error) return r.json.error + ": " + (r.json.detail || "");
    return "HTTP " + r.status + (r.text ? ": " + r.text.slice(0, 300) : "");
  }

  // ---- the connection's state and the problem line ----------------------------------------

  function setConn(s, title) {
    const c = $("conn");
    c.dataset.state = s;
    setText(c, s);
    c.title = title || "";
  }

  function showProblem(text) {
    const p = $("problem");
    p.hidden = !text;
    setText(p, text || "");
  }

  // ---- the figures -------------------------------------------------------------------------

  const model = {
    view: null, // the newest view (its series are not kept here)
    rules: new Map(), // "domain/name" -> { card, parts, chart, data: [xs, admitted, rejected, shadow, trial] }
    store: { data: [[], [], []], chart: null }, // [xs, failure policy, degraded]
    needFull: true,
  };

  const ruleKey = (r) => r.domain + "/" + r.name;

  // Column `c` of a series, as long as the series (a missing column reads as zeros).
  function column(c, n) {
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = c && c[i] !== undefined ? c[i] : 0;
    return out;
  }

  function seriesData(s) {
    const n = (s.admitted || []).length;
    const xs = new Array(n);
    for (let i = 0; i < n; i++) xs[i] = s.start + i;
    return [xs, column(s.admitted, n), column(s.rejected, n), column(s.shadow_rejected, n), column(s.trial_rejected, n), column(s.circuit_open, n)];
  }

  // Appends (or, for a second already held, replaces) `cols` at seconds `xs` to `data`, keeping
  // the last WINDOW seconds; whether a second was missed.
  function append(data, xs, cols) {
    let gap = false;
    for (let i = 0; i < xs.length; i++) {
      const t = xs[i];
      const n = data[0].length;
      const last = n ? data[0][n - 1] : null;
      if (last !== null && t <= last) {
        const j = n - 1 - (last - t);
        if (j >= 0 && data[0][j] === t) for (let c = 0; c < cols.length; c++) data[c + 1][j] = cols[c][i];
        continue;
      }
      if (last !== null && t > last + 1) gap = true;
      data[0].push(t);
      for (let c = 0; c < cols.length; c++) data[c + 1].push(cols[c][i]);
    }
    const newest = data[0].length ? data[0][data[0].length - 1] : 0;
    let drop = 0;
    while (drop < data[0].length && data[0][drop] <= newest - WINDOW) drop++;
    if (drop) for (const d of data) d.splice(0, drop);
    return gap;
  }

  // ---- charts ------------------------------------------------------------------------------

  function chartWidth(box) {
    return Math.max(160, Math.floor(box.clientWidth || 300));
  }

  function axes() {
    const stroke = css("--muted") || "#5d6470";
    const grid = { stroke: css("--line") || "#dfe2e8", width: 1 };
    const two = (n) => String(n).padStart(2, "0");
    // Local clock times, seconds only where a tick falls within a minute.
    const clock = (u, splits) =>
      splits.map((t) => {
        const d = new Date(t * 1000);
        const hm = two(d.getHours()) + ":" + two(d.getMinutes());
        return d.getSeconds() ? hm + ":" + two(d.getSeconds()) : hm;
      });
    return [
      { stroke, grid, ticks: grid, space: 70, values: clock },
      { stroke, grid, ticks: grid, size: 44 },
    ];
  }

  function makeChart(box, series, data, height, scales) {
    if (typeof uPlot !== "function") return null;
    const chart = new uPlot(
      {
        width: chartWidth(box),
        height: height || 170,
        scales: Object.assign({ x: { time: true } }, scales || {}),
        series: [{}].concat(series),
        axes: axes(),
        legend: { live: false },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      box,
    );
    box.chart = chart;
    if (typeof ResizeObserver === "function" && !box.resizing) {
      // One observer per box, resizing the chart the box holds now.
      let w = chartWidth(box);
      box.resizing = new ResizeObserver(() => {
        const nw = chartWidth(box);
        if (nw !== w && box.chart) {
          w = nw;
          box.chart.setSize({ width: nw, height: height || 170 });
        }
      });
      box.resizing.observe(box);
    }
    return chart;
  }

  function ruleSeries() {
    return [
      { label: "admitted/s", stroke: css("--ok") || "#1a7f37", width: 1.5 },
      { label: "rejected/s", stroke: css("--bad") || "#c62828", width: 1.5 },
      { label: "shadow would reject/s", stroke: css("--warn") || "#b26a00", width: 1, dash: [4, 4] },
      { label: "trial would reject/s", stroke: "#8a4fd8", width: 1.5, dash: [2, 3] },
      { label: "refused by breaker/s", stroke: "#7a1f3d", width: 1.5, dash: [6, 3] },
    ];
  }

  // ---- a rule's card -----------------------------------------------------------------------

  function fig(label, f) {
    const value = el("span", { class: "value", "data-f": f, text: "–" });
    const box = el("div", { class: "fig", "data-fig": f }, [el("span", { class: "label", text: label }), value]);
    return { box, value };
  }

  function fact(label, f) {
    const dd = el("dd", { "data-f": f });
    return { box: el("div", {}, [el("dt", { text: label }), dd]), dd };
  }

  function hitterTable(list, title) {
    const tbody = el("tbody");
    const table = el("table", { "data-list": list }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "descriptor" }), el("th", { text: "per second" })])]),
      tbody,
    ]);
    return { box: el("div", {}, [el("h4", { text: title }), el("div", { class: "scroll" }, [table])]), tbody };
  }

  function makeRule(r) {
    const k = ruleKey(r);
    const title = el("h3", { text: r.domain + " / " + r.name });
    const pattern = el("code", { text: r.pattern || "" });
    const shadow = el("span", { class: "badge warn", text: "shadow" });
    const card = el("article", { class: "rule", "data-rule": k }, [el("header", {}, [title, pattern, shadow])]);

    const figs = {
      admitted: fig("admitted/s", "admitted"),
      rejected: fig("rejected/s", "rejected"),
      ratio: fig("rejection ratio", "ratio"),
      shadow: fig("shadow would reject/s", "shadow"),
      trial: fig("trial would reject/s", "trial"),
      breaker: fig("refused by breaker/s", "circuit-open"),
    };
    card.append(el("div", { class: "figures" }, Object.values(figs).map((f) => f.box)));

    const facts = {
      limit: fact("limit in force", "limit"),
      schedule: fact("schedule", "schedule"),
      next: fact("next change", "next"),
      trial: fact("trial", "trial-limit"),
      totals: fact("since start (admitted / rejected)", "totals"),
    };
    card.append(el("dl", { class: "facts" }, Object.values(facts).map((f) => f.box)));

    const chartBox = el("div", { class: "chart" });
    card.append(chartBox);

    const admitted = hitterTable("top_admitted", "admitted most");
    const rejected = hitterTable("top_rejected", "rejected most");
    card.append(el("div", { class: "who" }, [admitted.box, rejected.box]));

    const nodesBody = el("tbody");
    const nodesBox = el("div", { class: "scroll" }, [
      el("table", { "data-list": "by_node" }, [
        el("thead", {}, [el("tr", {}, [el("th", { text: "node" }), el("th", { text: "admitted/s" }), el("th", { text: "rejected/s" })])]),
        nodesBody,
      ]),
    ]);
    card.append(nodesBox);

    const trial = makeTrial(r);
    card.append(trial.box);

    const entry = {
      card,
      parts: { shadow, figs, facts, admitted: admitted.tbody, rejected: rejected.tbody, nodesBody, nodesBox, trial },
      chart: null,
      chartBox,
      data: [[], [], [], [], []],
    };
    model.rules.set(k, entry);
    return entry;
  }

  function hitterRows(tbody, list) {
    clear(tbody);
    if (!list || !list.length) {
      tbody.append(el("tr", {}, [el("td", { class: "muted", colspan: 2, text: "none" })]));
      return;
    }
    for (const h of list) {
      const rate = fmtRate(h.rate) + (h.error > 0 ? " ± " + fmtRate(h.error) : "");
      tbody.append(el("tr", {}, [el("td", { class: "desc mono", text: h.descriptor }), el("td", { class: "num", text: rate })]));
    }
  }

  function renderRule(entry, r) {
    const p = entry.parts;
    p.shadow.hidden = !r.shadow;
    setText(p.figs.admitted.value, fmtRate(r.admitted_rate));
    setText(p.figs.rejected.value, fmtRate(r.rejected_rate));
    setText(p.figs.ratio.value, fmtPct(r.rejection_ratio));
    p.figs.ratio.value.dataset.value = String(r.rejection_ratio);
    const high = r.rejection_ratio > HIGH_RATIO;
    p.figs.ratio.box.classList.toggle("high", high);
    entry.card.classList.toggle("high", high);
    setText(p.figs.shadow.value, fmtRate(r.shadow_rejected_rate));
    p.figs.shadow.box.hidden = !r.shadow && !(r.totals && r.totals.shadow_rejected > 0);
    setText(p.figs.trial.value, r.trial ? fmtRate(r.trial_rejected_rate) : "–");
    p.figs.trial.value.dataset.value = String(r.trial_rejected_rate || 0);
    p.figs.trial.box.hidden = !r.trial;
    // Requests an open circuit breaker refused before this rule was asked (not in the ratio).
    setText(p.figs.breaker.value, fmtRate(r.circuit_open_rate));
    p.figs.breaker.value.dataset.value = String(r.circuit_open_rate || 0);
    p.figs.breaker.box.hidden = !(r.circuit_open_rate > 0 || (r.totals && r.totals.circuit_open > 0));
    p.figs.breaker.box.classList.toggle("high", r.circuit_open_rate > 0);

    setText(p.facts.limit.dd, r.limit || "unlimited");
    setText(p.facts.schedule.dd, r.schedule || "none");
    p.facts.schedule.box.hidden = !r.schedule;
    const next = r.next_change;
    setText(p.facts.next.dd, next ? fmtTime(next.at_ms) + " → " + (next.limit || "unlimited") : "none");
    p.facts.next.box.hidden = !r.schedule;
    setText(p.facts.trial.dd, r.trial || "none");
    p.facts.trial.box.hidden = !r.trial;
    const t = r.totals || {};
    setText(p.facts.totals.dd, (t.admitted || 0) + " / " + (t.rejected || 0) + (t.failure_policy ? " · failure policy " + t.failure_policy : ""));

    hitterRows(p.admitted, r.top_admitted);
    hitterRows(p.rejected, r.top_rejected);

    const nodes = r.by_node || [];
    p.nodesBox.hidden = !nodes.length;
    clear(p.nodesBody);
    for (const n of nodes) {
      p.nodesBody.append(el("tr", {}, [
        el("td", { class: "mono", text: n.node }),
        el("td", { class: "num", text: fmtRate(n.admitted_rate) }),
        el("td", { class: "num", text: fmtRate(n.rejected_rate) }),
      ]));
    }

    renderTrial(p.trial, r);

    // The chart draws the would-be rejections of a shadow rule and of a trial only where there
    // are such; it is made again when that changes.
    const shadowShown = !!r.shadow || (r.totals && r.totals.shadow_rejected > 0);
    const cols = [0, 1, 2].concat(shadowShown ? [3] : [], r.trial ? [4] : [], p.figs.breaker.box.hidden ? [] : [5]);
    const sig = cols.join(",");
    const data = cols.map((c) => entry.data[c]);
    if (entry.chart && entry.chartSig === sig) {
      entry.chart.setData(data);
    } else {
      if (entry.chart) entry.chart.destroy();
      const all = ruleSeries();
      entry.chart = makeChart(entry.chartBox, cols.slice(1).map((c) => all[c - 1]), data);
      entry.chartSig = sig;
    }
  }

  // ---- trying a limit ----------------------------------------------------------------------

  function makeTrial(r) {
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

    const run = async (what, change) => {
      setText(result, what + "…");
      const out = await editRule(domain, name, change);
      setText(result, out.ok ? what + ": version " + out.json.version + " in force" : what + " refused: " + describe(out));
      result.classList.toggle("muted", out.ok);
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
      run("trial " + n + " per " + w, (rule) => {
        rule.trial = { limit: n, window: w };
      });
    });
    promote.addEventListener("click", () =>
      run("promoted", (rule) => {
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
      run("dropped", (rule) => {
        delete rule.trial;
      }),
    );
    return { box, form, actions };
  }

  function renderTrial(t, r) {
    t.box.hidden = !!r.shadow;
    t.actions.hidden = !r.trial;
  }

  // The rules from `GET /v1/rules`, `change` applied to rule `domain`/`name`, sent back with
  // `PUT /v1/rules`: one versioned change.
  async function editRule(domain, name, change) {
    const g = await api("GET", "v1/rules");
    if (!g.ok || !g.json) return g;
    const doc = g.json;
    const rule = (doc.rule || []).find((x) => (x.domain || doc.domain) === domain && x.name === name);
    if (!rule) return { ok: false, status: 0, json: { error: "not_found", detail: "rule " + domain + "/" + name + " is not in force" } };
    try {
      change(rule);
    } catch (e) {
      return { ok: false, status: 0, json: { error: "refused", detail: String(e.message || e) } };
    }
    return api("PUT", "v1/rules", JSON.stringify(doc), "application/json");
  }

  // ---- the other sections ------------------------------------------------------------------

  function renderAlerts(alerts) {
    const tbody = $("alerts").tBodies[0];
    clear(tbody);
    $("no-alerts").hidden = alerts.length > 0;
    $("alerts").hidden = alerts.length === 0;
    for (const a of alerts) {
      tbody.append(el("tr", { class: a.state, "data-alert": a.name }, [
        el("td", { text: a.name }),
        el("td", { text: a.watches }),
        el("td", { class: "state", "data-f": "state", text: a.state }),
        el("td", { text: a.since_ms ? fmtTime(a.since_ms) : "–" }),
        el("td", { class: "num", text: a.value === null || a.value === undefined ? "–" : String(Math.round(a.value * 1000) / 1000) }),
      ]));
    }
  }

  function renderBreakers(breakers) {
    const tbody = $("breakers").tBodies[0];
    clear(tbody);
    $("no-breakers").hidden = breakers.length > 0;
    $("breakers").hidden = breakers.length === 0;
    for (const b of breakers) {
      const closed = b.phase === "closed";
      const row = b.phase === "open" ? "firing" : b.phase === "half_open" ? "pending" : "";
      // Why it opened: the calls and bad calls at its last transition to open.
      const why = b.opened_calls === null || b.opened_calls === undefined ? "–" : b.opened_bad + " bad of " + b.opened_calls;
      const refused = el("td", { class: "num", "data-f": "refused", "data-value": b.refused_rate || 0, text: fmtRate(b.refused_rate || 0) });
      refused.classList.toggle("refusing", b.refused_rate > 0);
      tbody.append(el("tr", { class: row, "data-breaker": b.key }, [
        el("td", { text: b.domain + " / " + b.name }),
        el("td", { class: "desc mono", text: b.key }),
        el("td", { class: "state", "data-f": "phase", text: b.phase.replace("_", "-") }),
        el("td", { text: fmtTime(b.since_ms) }),
        el("td", { class: "num", "data-f": "calls", text: closed ? b.calls : "–" }),
        el("td", { class: "num", "data-f": "bad", text: closed ? b.bad : "–" }),
        el("td", { class: "num", "data-f": "opened", text: closed ? "–" : why }),
        refused,
        el("td", { class: "num", text: b.retry_after_ms === null || b.retry_after_ms === undefined ? "–" : fmtSecs(b.retry_after_ms / 1000) }),
        el("td", { class: "num", "data-f": "probes", text: b.phase === "half_open" ? b.probes_out : "–" }),
        el("td", { "data-f": "scope", text: b.shared ? "cluster" : "node" }),
      ]));
    }
  }

  function renderQueues(queues) {
    const tbody = $("queues").tBodies[0];
    clear(tbody);
    $("no-queues").hidden = queues.length > 0;
    $("queues").hidden = queues.length === 0;
    for (const q of queues) {
      tbody.append(el("tr", { "data-queue": q.instance }, [
        el("td", { text: q.domain + " / " + q.queue }),
        el("td", { class: "desc mono", text: q.instance }),
        el("td", { text: q.rate }),
        el("td", { class: "num", text: q.depth }),
        el("td", { class: "num", text: q.in_flight }),
        el("td", { class: "num", text: q.dead }),
        el("td", { class: "num", text: fmtSecs(q.oldest_age_s) }),
        el("td", { class: "num", text: fmtRate(q.release_rate) }),
        el("td", { class: "num", text: fmtSecs(q.drain_s) }),
      ]));
    }
  }

  function renderStore(s) {
    const box = $("store");
    const f = (name) => box.querySelector('[data-f="' + name + '"]');
    setText(f("kind"), s.kind || "–");
    setText(f("p50"), fmtMs(s.p50_ms));
    setText(f("p99"), fmtMs(s.p99_ms));
    const d = f("degraded");
    clear(d);
    d.append(el("span", { class: "badge " + (s.degraded ? "bad" : "ok"), text: s.degraded ? "degraded" : "answering" }));
    const data = model.store.data;
    const fp = data[1].reduce((a, b) => a + b, 0);
    const degradedSecs = data[2].reduce((a, b) => a + b, 0);
    setText(f("failure"), fp + (degradedSecs ? " · degraded " + degradedSecs + " s" : ""));
    if (!model.store.chart) {
      model.store.chart = makeChart($("store-chart"), [
        { label: "failure policy decisions/s", stroke: css("--warn") || "#b26a00", width: 1.5 },
        // Degraded seconds as a shaded band the chart's height.
        { label: "degraded", stroke: css("--bad") || "#c62828", width: 0, fill: "rgba(198, 40, 40, 0.18)", scale: "degraded", paths: stepped() },
      ], data, 130, { degraded: { range: [0, 1] } });
    } else {
      model.store.chart.setData(data);
    }
  }

  function stepped() {
    return uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
  }

  function storeColumns(s, at) {
    const fp = s.failure_policy_series || [];
    const dg = s.degraded_series || [];
    const n = Math.max(fp.length, dg.length);
    const xs = new Array(n);
    for (let i = 0; i < n; i++) xs[i] = at - n + 1 + i;
    return { xs, cols: [column(fp, n), column(dg, n)] };
  }

  function renderNodes(v) {
    setText($("scope"), v.scope === "cluster" ? "cluster" : "this node");
    setText($("node"), v.node ? "node " + v.node : "");
    const live = (v.nodes || []).filter((n) => n.live).length;
    setText($("cluster-scope"), v.scope === "cluster"
      ? "The whole cluster's figures: the sum of the " + live + " live nodes' (of " + (v.nodes || []).length + " known)."
      : "This node's own figures (the cluster's are summed when the nodes share a Redis).");
    const tbody = $("nodes").tBodies[0];
    clear(tbody);
    for (const n of v.nodes || []) {
      tbody.append(el("tr", { "data-node": n.id }, [
        el("td", { class: "mono", text: n.id }),
        el("td", {}, [el("span", { class: "badge " + (n.live ? "ok" : "bad"), text: n.live ? "live" : "gone" })]),
        el("td", { text: fmtTime(n.seen_ms) }),
      ]));
    }
  }

  function renderRulesInfo(info) {
    if (!info) return;
    setText($("rules-version"), info.version);
    setText($("rules-source"), info.source);
    if (model.shownVersion !== undefined && model.shownVersion !== info.version) loadHistory();
    model.shownVersion = info.version;
  }

  // ---- applying views ----------------------------------------------------------------------

  function render(v) {
    setText($("at"), v.at ? "at " + new Date(v.at * 1000).toLocaleTimeString() : "");
    const list = $("rules");
    $("no-rules").hidden = v.rules.length > 0;
    // Cards in the rules' order.
    v.rules.forEach((r, i) => {
      const entry = model.rules.get(ruleKey(r));
      if (list.children[i] !== entry.card) list.insertBefore(entry.card, list.children[i] || null);
      renderRule(entry, r);
    });
    renderAlerts(v.alerts || []);
    renderBreakers(v.breakers || []);
    renderQueues(v.queues || []);
    renderStore(v.store || {});
    renderNodes(v);
    renderRulesInfo(v.rules_info);
  }

  // The whole window: every series replaced.
  function applyFull(v) {
    const keep = new Set(v.rules.map(ruleKey));
    for (const [k, e] of model.rules) {
      if (!keep.has(k)) {
        if (e.chart) e.chart.destroy();
        e.card.remove();
        model.rules.delete(k);
      }
    }
    for (const r of v.rules) {
      const entry = model.rules.get(ruleKey(r)) || makeRule(r);
      const d = seriesData(r.series || {});
      for (let c = 0; c < d.length; c++) entry.data[c] = d[c];
    }
    const s = storeColumns(v.store || {}, v.at);
    model.store.data[0] = s.xs;
    model.store.data[1] = s.cols[0];
    model.store.data[2] = s.cols[1];
    model.view = v;
    model.needFull = false;
    render(v);
  }

  // One second more.
  function applyEvent(v) {
    if (!model.view || model.needFull) return;
    const same = v.rules.length === model.rules.size && v.rules.every((r) => model.rules.has(ruleKey(r)));
    if (!same) {
      // The rules changed: the whole window again.
      model.needFull = true;
      loadFull();
      return;
    }
    let gap = false;
    for (const r of v.rules) {
      const d = seriesData(r.series || {});
      gap = append(model.rules.get(ruleKey(r)).data, d[0], d.slice(1)) || gap;
    }
    const s = storeColumns(v.store || {}, v.at);
    gap = append(model.store.data, s.xs, s.cols) || gap;
    model.view = v;
    render(v);
    if (gap) {
      model.needFull = true;
      loadFull();
    }
  }

  let loading = null;
  function loadFull() {
    if (!loading) {
      loading = (async () => {
        const r = await api("GET", "v1/stats?window=" + WINDOW);
        if (r.status === 401) {
          unauthorized(r);
          return false;
        }
        if (!r.ok || !r.json) {
          showProblem("The figures cannot be read: " + describe(r));
          return false;
        }
        applyFull(r.json);
        showProblem("");
        return true;
      })().finally(() => {
        loading = null;
      });
    }
    return loading;
  }

  function unauthorized(r) {
    setConn("unauthorized", describe(r));
    showProblem("This server's figures need a token: enter the dashboard token or an admin token above.");
    stopStream();
  }

  // ---- the stream --------------------------------------------------------------------------

  let stream = null; // its AbortController
  let retry = null;
  let backoff = 1000;
  let lastEvent = 0;

  function stopStream() {
    if (stream) stream.abort();
    stream = null;
    if (retry) clearTimeout(retry);
    retry = null;
  }

  function again() {
    setConn("reconnecting");
    model.needFull = true;
    retry = setTimeout(follow, backoff);
    backoff = Math.min(backoff * 2, 15000);
  }

  // One Server-Sent Event: its `event:` name and its `data:` lines.
  function onBlock(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line[0] === ":") continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value[0] === " ") value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    lastEvent = Date.now();
    if (name !== "stats" || !data.length) return;
    applyEvent(JSON.parse(data.join("\n")));
  }

  async function follow() {
    stopStream();
    const ctrl = new AbortController();
    stream = ctrl;
    try {
      if (model.needFull || !model.view) {
        const ok = await loadFull();
        if (ctrl.signal.aborted) return;
        if (!ok) {
          if ($("conn").dataset.state !== "unauthorized") again();
          return;
        }
      }
      const resp = await fetch("v1/stats/stream?window=1", {
        headers: headers({ Accept: "text/event-stream" }),
        signal: ctrl.signal,
        cache: "no-store",
      });
      if (resp.status === 401) {
        unauthorized({ status: 401, json: null, text: "" });
        return;
      }
      if (!resp.ok || !resp.body) throw new Error("the stream answered HTTP " + resp.status);
      setConn("live");
      backoff = 1000;
      lastEvent = Date.now();
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onBlock(block);
        }
      }
      throw new Error("the stream ended");
    } catch (e) {
      if (ctrl.signal.aborted || stream !== ctrl) return;
      stream = null;
      again();
    }
  }

  // A stream that went silent (a connection lost without a reset) is reconnected.
  setInterval(() => {
    if (stream && $("conn").dataset.state === "live" && Date.now() - lastEvent > STALL_MS) {
      stopStream();
      again();
    }
  }, 2000);

  // ---- rules in force: history, diff, rollback, editor -------------------------------------

  async function loadHistory() {
    const note = $("history-note");
    const table = $("history");
    const tbody = table.tBodies[0];
    if (!token() && !memoryToken) {
      // Versions are the admin API's: not asked for without a token.
      clear(tbody);
      table.hidden = true;
      setText(note, "Enter the admin token above to see the recent versions, their authors and diffs.");
      note.dataset.error = "no_token";
      model.historySig = null;
      return;
    }
    const r = await api("GET", "v1/rules/history?limit=20");
    // The same answer as shown: the rows (and the buttons someone may be pressing) stay.
    const sig = r.status + " " + r.text;
    if (sig === model.historySig) return;
    model.historySig = sig;
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
    const current = r.json.current;
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
        el("td", { class: "num", text: v.version }),
        el("td", { text: v.author }),
        el("td", { text: v.at }),
        el("td", { text: v.action }),
        el("td", { class: "desc", text: v.summary }),
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
    pre.append(el("strong", { text: "version " + n + " (" + r.json.author + ", " + r.json.at + ")\n" }));
    for (const line of (text || "(no change)").split("\n")) {
      const cls = line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del" : "";
      pre.append(el("span", { class: cls, text: line + "\n" }));
    }
  }

  async function rollback(n) {
    const out = await api("POST", "v1/rules/rollback", JSON.stringify({ version: n }), "application/json");
    showResult(out, out.ok ? "rolled back to version " + n + ": version " + out.json.version + " in force" : "rollback refused");
    if (out.ok) afterChange();
  }

  async function loadEditor() {
    const r = await api("GET", "v1/rules");
    if (!r.ok || !r.json) {
      showResult(r, "the rules cannot be read");
      return;
    }
    $("editor").value = JSON.stringify(r.json, null, 2);
    if (!model.view) {
      setText($("rules-version"), r.json.version);
      setText($("rules-source"), r.json.source);
    }
  }

  function showResult(r, what) {
    const pre = $("edit-result");
    pre.hidden = false;
    pre.classList.toggle("error", !r.ok);
    pre.dataset.status = String(r.status);
    setText(pre, what + " (HTTP " + r.status + ")\n" + (r.json ? JSON.stringify(r.json, null, 2) : r.text || ""));
  }

  async function sendEditor() {
    let doc;
    try {
      doc = JSON.parse($("editor").value);
    } catch (e) {
      showResult({ ok: false, status: 0, json: { error: "bad_json", detail: String(e.message || e) } }, "not sent");
      return;
    }
    const out = await api("PUT", "v1/rules", JSON.stringify(doc), "application/json");
    showResult(out, out.ok ? "version " + out.json.version + " in force" : "refused");
    if (out.ok) afterChange();
  }

  function afterChange() {
    loadHistory();
    if (!model.view) loadEditor();
  }

  // ---- start -------------------------------------------------------------------------------

  function start() {
    const span = WINDOW % 60 === 0 ? WINDOW / 60 + (WINDOW === 60 ? " minute" : " minutes") : WINDOW + " seconds";
    for (const e of document.querySelectorAll("[data-window]")) setText(e, span);
    memoryToken = token();
    $("token").value = memoryToken;
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      setToken($("token").value.trim());
      model.needFull = true;
      follow();
      loadHistory();
    });
    $("token-forget").addEventListener("click", () => {
      setToken("");
      $("token").value = "";
      model.needFull = true;
      follow();
      loadHistory();
    });
    $("editor-load").addEventListener("click", loadEditor);
    $("editor-send").addEventListener("click", sendEditor);
    follow();
    loadHistory();
    loadEditor();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
