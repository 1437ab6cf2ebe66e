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
  var FIT_ROUNDS = 4;  // relayouts to fit a chart's words in (each one fits what it measured)
  var GAP = 4;  // px kept between a word and the chart's edge

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
      .then(fit).then(hideDrawing);
  }

  // Plotly hides a tick label that would stick out of the chart (the "100 %" at an axis' end,
  // a phone's last date: the template lets them draw, kit/charts.py) and lets a title run past
  // the chart's edge, cut. Here the side margins widen by what sticks out, and a title wider
  // than the chart breaks into lines.
  function fit(element) {
    var rounds = 0;
    function again() {
      var change = rounds < FIT_ROUNDS ? misfits(element) : null;
      rounds += 1;
      return change ? window.Plotly.relayout(element, change).then(again) : element;
    }
    return again();
  }

  function misfits(element) {
    var box = element.getBoundingClientRect();
    var full = element._fullLayout;
    var change = {};
    var titles = [[".gtitle", "title", full.title], [".g-xtitle .xtitle", "xaxis.title",
                                                    full.xaxis && full.xaxis.title]];
    titles.forEach(function (pair) {
      var drawn = element.querySelector(pair[0]);
      if (!drawn) { return; }
      var at = drawn.getBoundingClientRect();
      if (at.left >= box.left + GAP / 2 && at.right <= box.right - GAP / 2) { return; }
      // the chart's title starts at the left; an axis' is centred on the plot
      var centre = (at.left + at.right) / 2;
      var room = pair[1] === "title" ? box.right - GAP - at.left
        : 2 * (Math.min(centre - box.left, box.right - centre) - GAP);
      var text = (pair[2] && pair[2].text) || "";
      var lines = wrapped(text, drawn, room);
      if (lines.length < 2 || lines.join("<br>") === text) { return; }
      change[pair[1] + ".text"] = lines.join("<br>");
      if (pair[1] === "title") {  // the title grows down, into the plot: the top margin grows
        var size = full.title.font.size;
        change["margin.t"] = full.margin.t + Math.ceil((lines.length - 1) * size * 1.3);
      }
    });
    // Plotly centres a title's lines on where one line would be: the first rises out of the chart
    var title = element.querySelector(".gtitle");
    var above = title ? box.top + GAP - title.getBoundingClientRect().top : 0;
    if (above > 0.5) {
      change["title.y"] = full.title.y - above / full.height;
      change["margin.t"] = (change["margin.t"] || full.margin.t) + Math.ceil(above);
    }
    var thinner = sparser(element, full.xaxis);
    if (thinner) { change["xaxis.dtick"] = thinner; }
    var left = 0, right = 0;
    element.querySelectorAll("svg.main-svg text").forEach(function (text) {
      if (!text.textContent.trim() || text.closest(".hoverlayer, .gtitle, .g-xtitle")) { return; }
      var drawn = text.getBoundingClientRect();
      left = Math.max(left, box.left + GAP - drawn.left);
      right = Math.max(right, drawn.right - (box.right - GAP));
    });
    if (left > 0.5) { change["margin.l"] = Math.ceil(full.margin.l + left); }
    if (right > 0.5) { change["margin.r"] = Math.ceil(full.margin.r + right); }
    return Object.keys(change).length ? change : null;
  }

  // A date axis whose labels, side by side, are wider than the plot (a phone's, or a narrow
  // card's) ticks half as often, rather than tilting its dates on top of each other.
  function sparser(element, axis) {
    if (!axis || axis.type !== "date" || !axis.dtick) { return null; }
    var labels = element.querySelectorAll(".xtick text");
    var widest = 0;
    labels.forEach(function (label) { widest = Math.max(widest, label.getBBox().width); });
    if (labels.length < 3 || labels.length * (widest + 2 * GAP) <= element._fullLayout._size.w) {
      return null;
    }
    var months = /^M(\d+)$/.exec(String(axis.dtick));
    return months ? "M" + 2 * Number(months[1]) : 2 * Number(axis.dtick);
  }

  // The words of a title in lines no wider than width, measured in the title's own font.
  function wrapped(text, drawn, width) {
    var style = window.getComputedStyle(drawn);
    var context = document.createElement("canvas").getContext("2d");
    context.font = style.fontWeight + " " + style.fontSize + " " + style.fontFamily;
    var lines = [];
    text.replace(/<br\s*\/?>/gi, " ").split(/\s+/).forEach(function (word) {
      var last = lines.length - 1;
      var longer = last >= 0 ? lines[last] + " " + word : word;
      if (last >= 0 && context.measureText(longer.replace(/<[^>]*>/g, "")).width <= width) {
        lines[last] = longer;
      } else {
        lines.push(word);
      }
    });
    return lines;
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

  // A window that narrows or widens (a phone turned, a laptop's window resized) gets each
  // chart drawn again from its figure, so its margins, titles and ticks fit the new width.
  // Only the width counts: a phone's address bar, hiding as the page scrolls, changes the height.
  var resized = null, width = window.innerWidth;
  window.addEventListener("resize", function () {
    if (window.innerWidth === width) { return; }
    width = window.innerWidth;
    clearTimeout(resized);
    resized = setTimeout(function () { drawAll(); }, 250);
  });

  window.portalCharts = { draw: draw, drawAll: drawAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { drawAll(); });
  } else {
    drawAll();
  }
})();
