/* Draws every server-built Plotly figure on the page: a <div data-figure="ID"> whose figure
   JSON sits in <script type="application/json" id="ID">. plotly.js comes from static/.
   The div is named by the chart's title and described by its data table (portal/_chart.html),
   so screen readers skip the drawing: its SVG text is the same numbers, scattered. */
(function () {
  "use strict";
  // Nothing leaves the page: no link to, nor export through, Plotly's online services.
  var CONFIG = { responsive: true, displaylogo: false, showLink: false,
                 showSendToCloud: false, showEditInChartStudio: false,
                 modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"] };

  var NARROW = 480;  // px: a chart narrower than this has no room for the toolbar beside its title

  function draw(element) {
    var source = document.getElementById(element.getAttribute("data-figure"));
    if (!source || !window.Plotly) { return; }
    var figure = JSON.parse(source.textContent);
    var config = Object.assign({}, CONFIG);
    // Plotly's toolbar (zoom, pan, picture) sits at the top right, over the title of a chart
    // as narrow as a phone: there the chart goes without it (its numbers are in its table).
    if (element.hasAttribute("data-static") || element.clientWidth < NARROW) {
      config.displayModeBar = false;
    }
    return window.Plotly.react(element, figure.data || [], figure.layout || {}, config)
      .then(hideDrawing);
  }

  function hideDrawing(element) {
    element.querySelectorAll("svg.main-svg").forEach(function (svg) {
      svg.setAttribute("aria-hidden", "true");
    });
    return element;
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
