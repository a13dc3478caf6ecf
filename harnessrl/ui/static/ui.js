// harnessrl dashboard: the only script. Switches the token view between loss-mask and logprob colours.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
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
});
