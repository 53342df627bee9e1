// dbsim: make the download paths in Locust's Run tab (plain table cells) links.
// Served by dbsim at /dbsim/static/links.js; nothing is fetched from elsewhere.
(function () {
  "use strict";
  function linkify(root) {
    root.querySelectorAll("td").forEach(function (cell) {
      var text = cell.textContent.trim();
      if (text.indexOf("/dbsim/run/") !== 0 || cell.querySelector("a")) return;
      var link = document.createElement("a");
      link.href = "." + text;
      link.textContent = text;
      if (text.slice(-5) === ".html") link.target = "_blank";
      cell.textContent = "";
      cell.appendChild(link);
    });
  }
  new MutationObserver(function () { linkify(document.body); }).observe(document.body, {
    childList: true, subtree: true, characterData: true,
  });
})();
// and a way to dbsim's start form and live charts (/dbsim/live) from every tab of Locust's page:
// a thin bar above the page, in the flow (never floating over Locust's figures).
(function () {
  "use strict";
  var bar = document.createElement("div");
  bar.id = "dbsim-live-bar";
  bar.style.cssText = "padding:3px 16px;background:#0b4f8a;font:600 13px system-ui,sans-serif;";
  var link = document.createElement("a");
  link.href = "./dbsim/live";
  link.textContent = "dbsim live page \u2192";
  link.id = "dbsim-live-link";
  link.style.cssText = "color:#fff;";
  bar.appendChild(link);
  // Latency beside the limiting device, with units, on every tab of Locust's page too.
  var now = document.createElement("span");
  now.id = "dbsim-now";
  now.style.cssText = "color:#fff;font-weight:400;margin-left:24px;";
  bar.appendChild(now);
  document.body.insertBefore(bar, document.body.firstChild);
  function poll() {
    fetch("./dbsim/live/now", { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        var strip = data.now || { items: [] };
        var texts = (strip.items || []).map(function (item) { return item.text; });
        now.textContent = texts.length ? strip.scope + ": " + texts.join(" \u00b7 ") : "";
      })
      .catch(function () { now.textContent = ""; })
      // Sooner while empty: the web UI builds the strip off its loop on the first asking.
      .finally(function () { setTimeout(poll, now.textContent ? 3000 : 1000); });
  }
  poll();
})();
