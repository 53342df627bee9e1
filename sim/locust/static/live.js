// dbsim live page: polls ./live/data (same origin, nothing fetched elsewhere) and draws the
// SVG charts the server renders with report.html's own chart code.
(function () {
  "use strict";
  var POLL_MS = 2000;
  var FAST_POLL_MS = 500; // while the run connects and loads: the phase moves quickly
  var delay = POLL_MS;
  var first = true; // the first answer picks the tab: the form when idle, else the charts
  function el(id) { return document.getElementById(id); }
  function esc(text) {
    return String(text).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function num(value) {
    if (value === null || value === undefined) return "–";
    var digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2;
    return value.toLocaleString("en-US", { maximumFractionDigits: digits });
  }
  function figure(chart, live) {
    var rows = chart.latest.map(function (item) {
      return "<tr><td>" + esc(item.panel) + "</td><td>" + esc(item.line) +
        '</td><td class="num" data-line="' + esc(item.line) + '" data-panel="' + esc(item.panel) +
        '" data-value="' + (item.value === null || item.value === undefined ? "" : item.value) +
        '">' + esc(item.text || num(item.value)) + "</td></tr>";
    }).join("");
    var when = chart.t === null ? "" : " at t = " + num(chart.t) + " s";
    return '<figure class="chart" data-key="' + esc(chart.key) + '" data-points="' + chart.points +
      '" data-t="' + (chart.t === null ? "" : chart.t) + '"><h3>' + esc(chart.title) + "</h3>" +
      chart.svg + "<figcaption>" + chart.points + " intervals since the run started" +
      (live ? "" : ' — <span class="stale">run stopped: these are its last figures</span>') +
      ". Latest interval" + esc(when) + " (measured, from the bundle's time series):</figcaption>" +
      '<table class="latest">' + rows + "</table></figure>";
  }
  function runTable(rows) {
    return rows.map(function (r) {
      var value = String(r.value);
      var cell = value.indexOf("/dbsim/") === 0
        ? '<a href="./' + esc(value.slice(7)) + '">' + esc(value) + "</a>" : esc(value);
      return "<tr><th>" + esc(r.figure) + "</th><td>" + cell + "</td><td>" +
        esc(r.meaning) + "</td></tr>";
    }).join("");
  }
  function phase(p) {
    var box = el("phase");
    box.dataset.phase = p.phase;
    el("phase-name").textContent = p.phase;
    el("phase-text").textContent = p.text || "";
    el("phase-fill").style.width = (p.pct === null || p.pct === undefined ? 0 : p.pct) + "%";
    var active = ["ready", "finished"].indexOf(p.phase) < 0;
    el("stop").disabled = !active;
    el("start").disabled = active;
    delay = ["connecting", "loading", "calibrating"].indexOf(p.phase) >= 0 ? FAST_POLL_MS : POLL_MS;
  }
  // The strip above the tabs: latency beside the limiting device, the cache check, the SLOs.
  function nowStrip(data) {
    var now = data.now || { scope: "no run yet", items: [] };
    el("now-scope").textContent = now.scope + ":";
    el("now-items").innerHTML = (now.items || []).map(function (item) {
      return '<span class="fig" data-key="' + esc(item.key) + '" data-value="' +
        (item.value === null || item.value === undefined ? "" : item.value) + '">' +
        esc(item.text) + "</span>";
    }).join("");
    var cache = el("now-cache");
    cache.textContent = data.cache ? data.cache.text : "";
    cache.className = data.cache ? (data.cache.exercised ? "ok" : "warn") : "";
    el("now-slos").innerHTML = (data.slos || []).map(function (slo) {
      var state = slo.met === true ? "met" : slo.met === false ? "missed" : "waiting";
      return '<li class="' + state + '">' + esc(slo.text) + "</li>";
    }).join("");
  }
  function render(data) {
    var run = data.run, view = data.view, live = run.status === "running";
    var now = run.phase || { phase: run.state === "idle" ? "ready" : run.state, text: run.state };
    phase(now);
    if (first && run.status !== "idle") document.querySelector('nav button[data-tab="charts"]').click();
    first = false;
    var status = el("status");
    status.textContent = run.status_text || run.status;
    status.className = "badge " + (run.status || "idle");
    var age = data.sample_age_s === null ? "" : ", latest sample " + num(data.sample_age_s) + " s old";
    var where = live ? "live: engine " + run.state : run.status === "idle" ? "no run yet" : "stopped";
    el("clock").textContent = where + age;
    el("verdict-kind").textContent = view.verdict.kind;
    el("verdict-call").textContent = view.verdict.call;
    el("verdict-summary").textContent = view.verdict.summary;
    nowStrip(data);
    var charts = view.charts || [];
    // Latency beside the storage that limits it: the operations and the device collector's
    // charts side by side (the Storage tab has every collector's).
    var pair = charts.filter(function (c) { return c.key === "application" || c.key === "block"; });
    el("tab-charts").innerHTML = pair.length
      ? '<div class="pair">' + pair.map(function (c) { return figure(c, live); }).join("") + "</div>"
      : '<p class="note">No run yet.</p>';
    el("tab-storage").innerHTML = charts.filter(function (c) { return c.key !== "application"; })
      .map(function (c) { return figure(c, live); }).join("") ||
      '<p class="note">No storage time series yet.</p>';
    if (view.curve) el("tab-curve").innerHTML = view.curve;
    var rows = data.rows || [];
    if (!rows.some(function (r) { return r.figure === "phase"; }))
      rows = [{ figure: "phase", value: now.phase, meaning: now.text || "" }].concat(rows);
    el("run-table").innerHTML = runTable(rows);
  }
  function poll() {
    fetch("./live/data", { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function () { el("clock").textContent = "web UI unreachable"; })
      .finally(function () { setTimeout(poll, delay); });
  }
  document.querySelectorAll("nav button").forEach(function (button) {
    button.addEventListener("click", function () {
      document.querySelectorAll("nav button, .tab").forEach(function (n) { n.classList.remove("on"); });
      button.classList.add("on");
      el("tab-" + button.dataset.tab).classList.add("on");
    });
  });
  poll();
})();
