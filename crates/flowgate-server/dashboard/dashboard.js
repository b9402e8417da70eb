// Flowgate's dashboard: the figures.
//
// It reads the JSON that scripts read too: `GET /v1/stats?window=900` once (15 minutes of
// per-second series), then `GET /v1/stats/stream?window=5`, Server-Sent Events named `stats`,
// each carrying the newest seconds, which replace or extend the charts' (a cluster's second can
// grow when a node's figures for it arrive a second late). The stream is read with fetch() rather
// than EventSource because EventSource cannot send an `Authorization` header, and a server
// started with --dashboard-token wants one. On any error it reconnects (with backoff), and
// reloads the whole window first, so missed seconds are filled; so it does when the figures
// change scope (this node alone while Redis is unreachable, the cluster's again after) or when
// the server revised seconds older than an event carries.
//
// Every part says how old its figures are: a part not read for STALE_MS is marked stale.
import {
  $, el, setText, clear, css, breakable, keyCell, fmtRate, fmtPct, fmtMs, fmtSecs, clock, token, setToken,
  api, headers, describe,
} from "./format.js";
import { makeTrial, renderTrial, loadHistory, loadEditor, sendEditor } from "./changes.js";
import { makeChart, stepped } from "./charts.js";
import { followStream } from "./stream.js";
import { renderReservations } from "./reservations.js";

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
  const STALL_MS = 10000; // a stream silent this long is reconnected
  const STALE_MS = 5000; // figures read longer ago than this (they are read each second) are stale
  const EVENT_WINDOW = 5; // seconds carried by each event of the stream
  const fmtTime = clock;

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
      debt: fig("debt (charged past the limit)", "debt"),
    };
    card.append(el("div", { class: "figures" }, Object.values(figs).map((f) => f.box)));

    const facts = {
      limit: fact("limit in force", "limit"),
      schedule: fact("schedule", "schedule"),
      next: fact("next change", "next"),
      trial: fact("trial", "trial-limit"),
      totals: fact("since start (admitted / rejected)", "totals"),
    };
    // The totals' figure and, on a cluster a node left, a note saying what they no longer count.
    facts.totals.value = el("span", { "data-f": "totals-value" });
    facts.totals.note = el("small", { class: "note", "data-f": "totals-note", hidden: "" });
    facts.totals.dd.append(facts.totals.value, facts.totals.note);
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
      tbody.append(el("tr", {}, [keyCell(h.descriptor, "desc"), el("td", { class: "num", text: rate })]));
    }
  }

  // What the totals count, and the nodes they no longer count: `{ label, note }` for view `v`.
  function totalsScope(v) {
    if (v.scope !== "cluster") return { label: "since this node started (admitted / rejected)", note: "" };
    const gone = (v.nodes || []).filter((n) => !n.live);
    const note = gone.length
      ? "live nodes only: " + gone.map((n) => n.id + " left at " + clock(n.seen_ms)).join(", ") + " (its counts are no longer included)"
      : "";
    return { label: "since each live node started (admitted / rejected)", note };
  }

  function renderRule(entry, r, totals) {
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
    // Units charged past the limit and not yet paid back (docs/charges.md): shown once a charge
    // has put the rule in debt, marked while it is.
    setText(p.figs.debt.value, String(r.debt || 0));
    p.figs.debt.value.dataset.value = String(r.debt || 0);
    if (r.debt > 0) p.figs.debt.box.dataset.seen = "1";
    p.figs.debt.box.hidden = !(r.debt > 0 || p.figs.debt.box.dataset.seen);
    p.figs.debt.box.classList.toggle("high", r.debt > 0);

    setText(p.facts.limit.dd, r.limit || "unlimited");
    setText(p.facts.schedule.dd, r.schedule || "none");
    p.facts.schedule.box.hidden = !r.schedule;
    const next = r.next_change;
    setText(p.facts.next.dd, next ? fmtTime(next.at_ms) + " → " + (next.limit || "unlimited") : "none");
    p.facts.next.box.hidden = !r.schedule;
    setText(p.facts.trial.dd, r.trial || "none");
    p.facts.trial.box.hidden = !r.trial;
    const t = r.totals || {};
    setText(p.facts.totals.box.firstChild, totals.label);
    setText(p.facts.totals.value, (t.admitted || 0) + " / " + (t.rejected || 0) + (t.failure_policy ? " · failure policy " + t.failure_policy : ""));
    setText(p.facts.totals.note, totals.note);
    p.facts.totals.note.hidden = !totals.note;

    hitterRows(p.admitted, r.top_admitted);
    hitterRows(p.rejected, r.top_rejected);

    const nodes = r.by_node || [];
    p.nodesBox.hidden = !nodes.length;
    clear(p.nodesBody);
    for (const n of nodes) {
      p.nodesBody.append(el("tr", {}, [
        keyCell(n.node),
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

  // ---- the other sections ------------------------------------------------------------------

  function renderAlerts(alerts) {
    const tbody = $("alerts").tBodies[0];
    clear(tbody);
    $("no-alerts").hidden = alerts.length > 0;
    $("alerts").hidden = alerts.length === 0;
    for (const a of alerts) {
      tbody.append(el("tr", { class: a.state, "data-alert": a.name }, [
        keyCell(a.name),
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

  // How old figures read at `ms` are at view `v`'s time (the end of its second), in ms.
  function ageMs(v, ms) {
    return ms === undefined || ms === null ? null : (v.at + 1) * 1000 - ms;
  }

  // Marks the part `name` stale (`data-stale`, and its note) when its figures, read at `ms`,
  // are older than STALE_MS at view `v`'s time; whether they are.
  function markStale(name, v, ms, what) {
    const age = ageMs(v, ms);
    const stale = age !== null && age > STALE_MS;
    const note = $(name + "-stale");
    note.hidden = !stale;
    if (stale) setText(note, "Stale: " + what + " last read at " + clock(ms) + ", " + fmtSecs(age / 1000) + " ago; shown as then.");
    $(name + "-section").classList.toggle("stale", stale);
    return stale;
  }

  function renderQueues(v) {
    const queues = v.queues || [];
    const tbody = $("queues").tBodies[0];
    clear(tbody);
    $("no-queues").hidden = queues.length > 0;
    $("queues").hidden = queues.length === 0;
    markStale("queues", v, v.read && v.read.queues_ms, "the queues' state was");
    // The queues an alert is firing on, by "domain/name".
    const alerting = new Set(
      (v.alerts || [])
        .filter((a) => a.state === "firing" && a.watched && a.watched.kind === "queue")
        .map((a) => a.watched.domain + "/" + a.watched.name),
    );
    for (const q of queues) {
      const firing = alerting.has(q.domain + "/" + q.queue);
      const cls = [firing ? "firing" : "", q.no_consumer ? "attention" : ""].join(" ").trim();
      const drains = q.no_consumer
        ? el("td", { class: "num", "data-f": "drain" }, [el("span", { class: "badge bad", text: "no consumer" })])
        : el("td", { class: "num", "data-f": "drain", text: fmtSecs(q.drain_s) });
      tbody.append(el("tr", { class: cls || null, "data-queue": q.instance, "data-alerting": firing ? "true" : null }, [
        keyCell(q.instance),
        el("td", { text: q.domain + " / " + q.queue }),
        el("td", { text: q.rate }),
        el("td", { class: "num", text: q.depth }),
        el("td", { class: "num", text: q.in_flight }),
        el("td", { class: "num", text: q.dead }),
        el("td", { class: "num", text: fmtSecs(q.oldest_age_s) }),
        el("td", { class: "num", text: fmtRate(q.release_rate) }),
        drains,
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
    // Redis: the primaries this node writes to (a failover changes them) and how often it followed one.
    const t = s.topology;
    for (const row of box.querySelectorAll("[data-redis]")) row.hidden = !t;
    if (t) {
      setText(f("primary"), (t.primaries.length ? t.primaries.join(", ") : "none known") + " (" + t.kind + ")");
      setText(f("followed"), t.failovers + " · " + t.reconnects);
    }
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

  function storeColumns(s, at) {
    const fp = s.failure_policy_series || [];
    const dg = s.degraded_series || [];
    const n = Math.max(fp.length, dg.length);
    const xs = new Array(n);
    for (let i = 0; i < n; i++) xs[i] = at - n + 1 + i;
    return { xs, cols: [column(fp, n), column(dg, n)] };
  }

  // On Redis, since when this node cannot reach it (null while it can).
  const unreachable = (v) => (v.store && v.store.kind === "redis" && v.store.unreachable_since_ms) || null;

  function renderOutage(v) {
    const since = unreachable(v);
    const banner = $("outage");
    banner.hidden = !since;
    if (since) {
      setText(banner, "Redis unreachable since " + clock(since) + ": node-only figures, limits decided by failure policies.");
    }
  }

  function renderNodes(v) {
    const down = unreachable(v);
    setText($("scope"), v.scope === "cluster" ? "cluster" : down ? "this node · Redis unreachable" : "this node");
    $("scope").classList.toggle("bad", !!down);
    setText($("node"), v.node ? "node " + v.node : "");
    const live = (v.nodes || []).filter((n) => n.live).length;
    const read = v.read && v.read.cluster_ms;
    setText($("cluster-scope"), v.scope === "cluster"
      ? "The whole cluster's figures: the sum of the " + live + " live nodes' (of " + (v.nodes || []).length + " known)."
      : down
        ? "Redis is unreachable: this node's own figures. The cluster's were last read at " + clock(read) + " and come back, with what every node counted meanwhile, when Redis answers."
        : "This node's own figures (the cluster's are summed when the nodes share a Redis).");
    const tbody = $("nodes").tBodies[0];
    clear(tbody);
    for (const n of v.nodes || []) {
      tbody.append(el("tr", { "data-node": n.id }, [
        keyCell(n.id),
        el("td", {}, [el("span", { class: "badge " + (n.live ? "ok" : "bad"), text: n.live ? "live" : "gone" })]),
        el("td", { text: n.started_ms ? fmtTime(n.started_ms) : "–" }),
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

  // The cells of a table that stacks on a narrow screen are labelled with their column's name.
  function labelCells(table) {
    const names = [...table.tHead.rows[0].cells].map((th) => th.textContent);
    for (const row of table.tBodies[0].rows) {
      [...row.cells].forEach((td, i) => {
        if (!td.dataset.label && names[i]) td.dataset.label = names[i];
      });
    }
  }

  // Keys shown as plain text (the breakers' instances) break only after their separators too.
  function breakKeys(table) {
    for (const td of table.querySelectorAll("td.desc:not([data-key])")) {
      td.dataset.key = td.textContent;
      td.classList.add("key");
      breakable(td, td.textContent);
    }
  }

  function render(v) {
    setText($("at"), v.at ? "at " + clock(v.at * 1000) : "");
    renderOutage(v);
    const totals = totalsScope(v);
    const list = $("rules");
    $("no-rules").hidden = v.rules.length > 0;
    // Cards in the rules' order.
    v.rules.forEach((r, i) => {
      const entry = model.rules.get(ruleKey(r));
      if (list.children[i] !== entry.card) list.insertBefore(entry.card, list.children[i] || null);
      renderRule(entry, r, totals);
    });
    renderAlerts(v.alerts || []);
    renderBreakers(v.breakers || []);
    breakKeys($("breakers"));
    renderReservations(v.reservations || []);
    renderQueues(v);
    renderStore(v.store || {});
    renderNodes(v);
    for (const t of document.querySelectorAll("table.stack")) labelCells(t);
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
    if (model.revisedWhileLoading) {
      model.revisedWhileLoading = false;
      model.needFull = true;
      loadFull();
    }
  }

  // The newest seconds.
  function applyEvent(v) {
    // Seconds before this event's were revised (the seconds nodes counted during an outage).
    const revised = v.revised_from !== undefined && v.revised_from !== null && v.revised_from <= v.at - EVENT_WINDOW;
    if (!model.view || model.needFull) {
      // The window being read may be older than the revision: read it again after.
      if (revised) model.revisedWhileLoading = true;
      return;
    }
    const same = v.rules.length === model.rules.size && v.rules.every((r) => model.rules.has(ruleKey(r)));
    // The whole window again when the rules changed, when the figures are another scope's (this
    // node's alone while Redis is unreachable, the cluster's again after), or when revised.
    if (!same || v.scope !== model.view.scope || revised) {
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
        // 401: no token or a wrong one; 403: a token without the reader scope (a worker's).
        if (r.status === 401 || r.status === 403) {
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
    showProblem("This server's figures need a reader or admin token: enter one above (" + describe(r) + ").");
    stopStream();
  }

  // ---- the stream --------------------------------------------------------------------------

  const stream = followStream({
    url: () => "v1/stats/stream?window=" + EVENT_WINDOW,
    // The whole window first when a second may be missing.
    prepare: () => (model.needFull || !model.view ? loadFull() : Promise.resolve(true)),
    onEvent: applyEvent,
    onBroken: () => {
      model.needFull = true;
    },
    onUnauthorized: () => unauthorized({ status: 401, json: null, text: "" }),
    setConn,
    stallMs: STALL_MS,
  });
  const follow = stream.follow;
  const stopStream = stream.stop;

  // ---- start -------------------------------------------------------------------------------

  function start() {
    const span = WINDOW % 60 === 0 ? WINDOW / 60 + (WINDOW === 60 ? " minute" : " minutes") : WINDOW + " seconds";
    for (const e of document.querySelectorAll("[data-window]")) setText(e, span);
    $("token").value = token();
    // Without figures (a token is wanted), the rules' version and source come from the rules.
    const info = (doc) => {
      if (model.view) return;
      setText($("rules-version"), doc.version);
      setText($("rules-source"), doc.source);
    };
    // A new token: the figures, the versions and the editor read again (an admin's rules hold
    // their URLs whole).
    const tokenChanged = (t) => {
      setToken(t);
      model.needFull = true;
      follow();
      loadHistory();
      loadEditor(info);
    };
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      tokenChanged($("token").value.trim());
    });
    $("token-forget").addEventListener("click", () => {
      $("token").value = "";
      tokenChanged("");
    });
    $("editor-load").addEventListener("click", () => loadEditor(info));
    $("editor-send").addEventListener("click", sendEditor);
    follow();
    loadHistory();
    loadEditor(info);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
