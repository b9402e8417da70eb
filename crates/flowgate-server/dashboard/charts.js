// Flowgate's dashboard: its charts (uPlot, vendored): time on a 24-hour clock, counts on a y
// axis as wide as its widest label.

import { css, fmtCount, tick } from "./format.js";

function chartWidth(box) {
  return Math.max(160, Math.floor(box.clientWidth || 300));
}

// The y axis as wide as its widest label (measured in the axis's font), so that no label is
// clipped whatever the figures' size.
function labelsWidth(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size; // uPlot asks again until the sizes settle
  let widest = 0;
  u.ctx.font = axis.font[0];
  for (const v of values || []) widest = Math.max(widest, u.ctx.measureText(v).width);
  return Math.ceil(widest / (window.devicePixelRatio || 1) + axis.ticks.size + axis.gap + 2);
}

function axes() {
  const stroke = css("--muted") || "#5d6470";
  const grid = { stroke: css("--line") || "#dfe2e8", width: 1 };
  return [
    // Local clock times (24 hours), seconds only where a tick falls within a minute.
    { stroke, grid, ticks: grid, space: 70, values: (u, splits) => splits.map(tick) },
    { stroke, grid, ticks: grid, size: labelsWidth, values: (u, splits) => splits.map(fmtCount) },
  ];
}

export function makeChart(box, series, data, height, scales) {
  if (typeof uPlot !== "function") return null;
  const chart = new uPlot(
    {
      width: chartWidth(box),
      height: height || 170,
      scales: Object.assign({ x: { time: true } }, scales || {}),
      series: [{}].concat(series),
      axes: axes(),
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
    },
    data,
    box,
  );
  box.chart = chart;
  if (typeof ResizeObserver === "function" && !box.resizing) {
    // One observer per box, resizing the chart the box holds now.
    let w = chartWidth(box);
    box.resizing = new ResizeObserver(() => {
      const nw = chartWidth(box);
      if (nw !== w && box.chart) {
        w = nw;
        box.chart.setSize({ width: nw, height: height || 170 });
      }
    });
    box.resizing.observe(box);
  }
  return chart;
}

export function stepped() {
  return uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
}
