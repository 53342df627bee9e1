// dbsim live page: polls ./live/data (same origin, nothing fetched elsewhere) and draws the
// SVG charts the server renders with report.html's own chart code.
(function () {
  "use strict";
  var POLL_MS = 2000;
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
        '">' + num(item.value) + "</td></tr>";
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
  function render(data) {
    var run = data.run, view = data.view, live = run.status === "running";
    var status = el("status");
    status.textContent = run.status_text || run.status;
    status.className = "badge " + (run.status || "idle");
    var age = data.sample_age_s === null ? "" : ", latest sample " + num(data.sample_age_s) + " s old";
    el("clock").textContent = (live ? "live: engine " + run.state : "stopped") + age;
    el("verdict-kind").textContent = view.verdict.kind;
    el("verdict-call").textContent = view.verdict.call;
    el("verdict-summary").textContent = view.verdict.summary;
    var charts = view.charts || [];
    el("tab-charts").innerHTML = charts.filter(function (c) { return c.key === "application"; })
      .map(function (c) { return figure(c, live); }).join("") || '<p class="note">No run yet.</p>';
    el("tab-storage").innerHTML = charts.filter(function (c) { return c.key !== "application"; })
      .map(function (c) { return figure(c, live); }).join("") ||
      '<p class="note">No storage time series yet.</p>';
    if (view.curve) el("tab-curve").innerHTML = view.curve;
    el("run-table").innerHTML = runTable(data.rows || []);
  }
  function poll() {
    fetch("./live/data", { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function () { el("clock").textContent = "web UI unreachable"; })
      .finally(function () { setTimeout(poll, POLL_MS); });
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
