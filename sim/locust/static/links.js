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
