// dbsim: every POST (or other state-changing request) the page sends to its own web UI carries
// the page's token (sim/locust/guard.py): the web UI refuses such a request without it, so a
// page from elsewhere, which cannot read this page, cannot start or stop anything. Loaded
// first in the page's head; Locust's page and dbsim's both send their requests with fetch.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="dbsim-token"]');
  if (!meta || !window.fetch) return;
  var token = meta.getAttribute("content");
  var original = window.fetch;
  var SAFE = { GET: true, HEAD: true, OPTIONS: true };
  function methodOf(input, init) {
    if (init && init.method) return String(init.method).toUpperCase();
    return input instanceof Request ? input.method.toUpperCase() : "GET";
  }
  function urlOf(input) {
    return input instanceof Request ? input.url : String(input);
  }
  window.fetch = function (input, init) {
    var ownPage = new URL(urlOf(input), window.location.href).origin === window.location.origin;
    if (!ownPage || SAFE[methodOf(input, init)]) return original.call(window, input, init);
    var options = Object.assign({}, init || {});
    var headers = new Headers(options.headers || (input instanceof Request ? input.headers : {}));
    headers.set("X-Dbsim-Token", token);
    options.headers = headers;
    return original.call(window, input, options);
  };
})();
