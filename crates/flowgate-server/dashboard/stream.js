// Flowgate's dashboard: the stream of figures (`GET /v1/stats/stream`, Server-Sent Events named
// `stats`), read with fetch() rather than EventSource because EventSource cannot send an
// `Authorization` header, and a server started with --dashboard-token wants one. On any error it
// reconnects with a growing pause (1 s to 15 s); a stream silent for `stallMs` is reconnected
// too.

import { headers } from "./format.js";

// Follows the stream at `opts.url()`: before each connection `opts.prepare()` (false: not now),
// each event's JSON to `opts.onEvent`, `opts.onBroken()` when it breaks, `opts.onUnauthorized()`
// on 401, and its state (`live`, `reconnecting`) to `opts.setConn`.
export function followStream(opts) {
  let current = null; // the connection's AbortController
  let retry = null;
  let backoff = 1000;
  let lastEvent = 0;
  let live = false;

  const setConn = (s) => {
    live = s === "live";
    opts.setConn(s);
  };

  function stop() {
    if (current) current.abort();
    current = null;
    if (retry) clearTimeout(retry);
    retry = null;
  }

  function again() {
    setConn("reconnecting");
    opts.onBroken();
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
    opts.onEvent(JSON.parse(data.join("\n")));
  }

  async function follow() {
    stop();
    const ctrl = new AbortController();
    current = ctrl;
    try {
      // (Stopped meanwhile, e.g. when a token is wanted: not retried.)
      const ok = await opts.prepare();
      if (ctrl.signal.aborted) return;
      if (!ok) {
        again();
        return;
      }
      const resp = await fetch(opts.url(), {
        headers: headers({ Accept: "text/event-stream" }),
        signal: ctrl.signal,
        cache: "no-store",
      });
      if (resp.status === 401 || resp.status === 403) {
        opts.onUnauthorized();
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
      if (ctrl.signal.aborted || current !== ctrl) return;
      current = null;
      again();
    }
  }

  // A stream that went silent (a connection lost without a reset) is reconnected.
  setInterval(() => {
    if (current && live && Date.now() - lastEvent > opts.stallMs) {
      stop();
      again();
    }
  }, 2000);

  return { follow, stop };
}
