// harnessrl dashboard: the only script. Switches the token view between loss-mask and logprob colours,
// and keeps a live run's page current: it fetches the run's headline and metrics every few seconds
// (GET <run>/live, server-rendered like the page) and swaps them in, keeping open groups open.
"use strict";
var POLL_MS = 5000;

function tokenColours() {
  var view = document.getElementById("tokens");
  if (!view) return;
  var buttons = document.querySelectorAll(".colour-mode");
  function show(mode) {
    view.classList.remove("by-mask", "by-lp");
    view.classList.add(mode);
    buttons.forEach(function (b) { b.classList.toggle("active", b.dataset.mode === mode); });
  }
  buttons.forEach(function (b) { b.addEventListener("click", function () { show(b.dataset.mode); }); });
  show("by-mask");
}

function liveRun() {
  var live = document.getElementById("live");
  if (!live || live.dataset.live !== "1") return;
  function refresh() {
    if (document.hidden) { setTimeout(refresh, POLL_MS); return; }
    fetch(live.dataset.src, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.redirected || r.status === 401 || r.status === 403) return null;  // the session lapsed: stop
      if (!r.ok) throw new Error("HTTP " + r.status);  // try again later
      return r.text();
    }).then(function (html) {
      if (!html) return;
      var box = document.createElement("div");
      box.innerHTML = html;  // server-rendered and escaped, as the page itself
      var fresh = box.querySelector("#live");
      if (!fresh) return;
      live.querySelectorAll("details[id]").forEach(function (d) {
        var same = fresh.querySelector("details#" + CSS.escape(d.id));
        if (same) same.open = d.open;
      });
      live.replaceWith(fresh);
      live = fresh;
      if (live.dataset.live === "1") setTimeout(refresh, POLL_MS);
    }).catch(function () { setTimeout(refresh, POLL_MS); });
  }
  setTimeout(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", function () { tokenColours(); liveRun(); });
