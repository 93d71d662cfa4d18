// The status page's live updates: the server pushes the view's HTML over
// Server-Sent Events; this swaps it in and keeps "how long ago" current.
(function () {
  "use strict";
  var view = document.getElementById("view");
  var conn = document.getElementById("conn");
  function state(s, text) { conn.dataset.state = s; conn.textContent = text; }
  function ago() {
    var now = Date.now();
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var t = Date.parse(el.dataset.since);
      if (isNaN(t) || t <= 0) { el.textContent = ""; return; }
      var s = Math.max(0, (now - t) / 1000);
      el.textContent = "(" + (s < 60 ? s.toFixed(1) + " s" : s < 3600 ? Math.floor(s / 60) + " min" : (s / 3600).toFixed(1) + " h") + " ago)";
    });
  }
  ago();
  setInterval(ago, 1000);
  if (!window.EventSource) { state("static", "not live (no EventSource)"); return; }
  state("connecting", "connecting…");
  // Relative, as the page's other links: it works behind a path prefix
  // (kubectl proxy, an ingress path).
  var es = new EventSource("status/events");
  var updates = 0;
  es.onopen = function () { state("live", "live"); };
  es.onerror = function () {
    if (es.readyState === EventSource.CLOSED) {
      // Refused (503: too many pages open on this node): no retry.
      state("closed", "not live: the node refused the stream; reload later");
    } else {
      state("reconnecting", "reconnecting…");
    }
  };
  es.addEventListener("view", function (e) {
    view.innerHTML = e.data;
    updates++;
    view.dataset.updates = updates;
    state("live", "live");
    ago();
  });
})();
