// The live view: audit records from /ui/live/events (Server-Sent Events)
// as table rows, newest first, at most maxRows.
(function () {
  "use strict";
  var maxRows = 500;
  var table = document.getElementById("live");
  var body = table.querySelector("tbody");
  var status = document.getElementById("live-status");
  var counter = document.getElementById("live-count");
  var n = 0;

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  function topics(rec) {
    return (rec.topics || []).map(function (t) {
      var ps = (t.partitions || []).map(function (p) { return p.partition; });
      return ps.length ? t.name + "[" + ps.join(",") + "]" : t.name;
    }).join(" ");
  }

  function row(rec) {
    var tr = document.createElement("tr");
    tr.className = "rec " + (rec.decision || rec.event);
    cell(tr, (rec.time || "").replace("T", " ").slice(0, 23));
    cell(tr, rec.client_addr || "");
    cell(tr, rec.client_id || "", "client-id");
    cell(tr, rec.event === "request" ? rec.api + " v" + rec.version : rec.event, "api");
    cell(tr, topics(rec), "topics");
    var d = rec.decision || (rec.close_reason ? "closed: " + rec.close_reason : "");
    if (rec.rule) d += " by " + rec.rule;
    if (rec.error_codes && rec.error_codes.length) d += " errors " + rec.error_codes.join(",");
    cell(tr, d, rec.decision === "denied" ? "denied" : "");
    cell(tr, rec.latency_ms !== undefined ? rec.latency_ms.toFixed(2) + " ms" : "");
    return tr;
  }

  var es = new EventSource("/ui/live/events?" + (table.dataset.query || ""));
  es.onopen = function () { status.textContent = "live"; status.className = "ok"; };
  es.onerror = function () { status.textContent = "disconnected (retrying)"; status.className = "bad"; };
  es.onmessage = function (ev) {
    var rec;
    try { rec = JSON.parse(ev.data); } catch (e) { return; }
    body.insertBefore(row(rec), body.firstChild);
    while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
    n++;
    counter.textContent = String(n);
  };
})();
