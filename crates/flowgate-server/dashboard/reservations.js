// Flowgate's dashboard: the outstanding reservations per rule (`POST /v1/reserve` not yet
// committed nor expired; the cluster's on Redis), from the figures' `reservations`.

import { $, el, clear } from "./format.js";

export function renderReservations(list) {
  const tbody = $("reservations").tBodies[0];
  clear(tbody);
  $("no-reservations").hidden = list.length > 0;
  $("reservations").hidden = list.length === 0;
  for (const r of list) {
    tbody.append(el("tr", { "data-reservations": r.domain + "/" + r.rule }, [
      el("td", { text: r.domain + " / " + r.rule }),
      el("td", { class: "num", "data-f": "count", text: String(r.count) }),
      el("td", { class: "num", "data-f": "units", text: String(r.units) }),
    ]));
  }
}
