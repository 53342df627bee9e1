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
// and a way to dbsim's start form and live charts (/dbsim/live) from every tab of Locust's page.
(function () {
  "use strict";
  var link = document.createElement("a");
  link.href = "./dbsim/live";
  link.textContent = "dbsim start form & live charts";
  link.id = "dbsim-live-link";
  link.style.cssText = "position:fixed;right:16px;bottom:12px;z-index:9999;padding:6px 12px;" +
    "background:#0b4f8a;color:#fff;border-radius:6px;font:600 14px system-ui,sans-serif;";
  document.body.appendChild(link);
})();
