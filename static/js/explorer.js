/* The cost ratio explorer, live: when an input changes, ask the server for the results of the
   form's values (a JSON endpoint returning the rendered results) and redraw them in place.
   Without JavaScript the form's "Update" button does the same with a page load. */
(function () {
  "use strict";
  var form = document.getElementById("explorer-form");
  var results = document.getElementById("explorer-results");
  var status = document.getElementById("explorer-status");
  if (!form || !results) { return; }
  var timer = null;
  var latest = 0;

  function query() {
    return new URLSearchParams(new FormData(form)).toString();
  }

  // Tell screen readers the new pick and why (or what to fix), not the whole redrawn results.
  function announce() {
    if (!status) { return; }
    var pick = results.querySelector("#recommended");
    var reason = results.querySelector("#recommendation");
    var errors = results.querySelector(".errorlist");
    var parts = pick ? [pick.textContent, reason ? reason.textContent : ""]
      : ["Check the settings:", errors ? errors.textContent : ""];
    status.textContent = parts.join(" ").replace(/\s+/g, " ").trim();
  }

  function refresh() {
    var ticket = ++latest;
    var params = query();
    results.setAttribute("aria-busy", "true");
    fetch(form.getAttribute("data-live") + "?" + params, {
      headers: { "Accept": "application/json" }, credentials: "same-origin"
    })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (payload) {
        if (ticket !== latest) { return; }
        results.innerHTML = payload.html;
        window.portalCharts.drawAll(results);
        announce();
        history.replaceState(null, "", "?" + params);
      })
      .catch(function () { /* keep the last results; the Update button still works */ })
      .finally(function () {
        if (ticket === latest) { results.removeAttribute("aria-busy"); }
      });
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  }

  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  form.addEventListener("submit", function (event) { event.preventDefault(); refresh(); });
})();
