/* Draws every server-built Plotly figure on the page: a <div data-figure="ID"> whose figure
   JSON sits in <script type="application/json" id="ID">. plotly.js comes from static/. */
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false,
                 modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"] };

  function draw(element) {
    var source = document.getElementById(element.getAttribute("data-figure"));
    if (!source || !window.Plotly) { return; }
    var figure = JSON.parse(source.textContent);
    var config = Object.assign({}, CONFIG);
    if (element.hasAttribute("data-static")) { config.displayModeBar = false; }
    window.Plotly.react(element, figure.data || [], figure.layout || {}, config);
  }

  function drawAll(root) {
    (root || document).querySelectorAll("[data-figure]").forEach(draw);
  }

  window.portalCharts = { draw: draw, drawAll: drawAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { drawAll(); });
  } else {
    drawAll();
  }
})();
