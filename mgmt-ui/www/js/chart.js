// A small canvas line chart for the API's samples. The time axis spans the
// samples there are -- a queue's minute, the overview's ten minutes, fewer
// while an object is young -- and nothing is drawn where there are none: a
// series whose samples are further apart than its step shows a gap. Values
// on y from 0 to a rounded maximum. Each series has a colour from the
// Okabe-Ito palette (distinguishable with the common colour-vision
// deficiencies) and its own dash pattern, and the legend repeats each
// series' current value as text -- the API's own rate or count, the number
// the page's tiles show -- so no meaning rests on colour alone.
import { h } from './dom.js';

export const COLORS = {
  blue: '#0072B2', orange: '#E69F00', green: '#009E73', vermillion: '#D55E00',
  purple: '#CC79A7', sky: '#56B4E9', yellow: '#B8A200', black: '#333333',
};
const DASHES = [[], [6, 3], [2, 3], [8, 3, 2, 3], [1, 2], [10, 4]];

// API samples (newest first, cumulative counters) -> per-second rates, oldest first.
export function ratesFromSamples(samples) {
  const out = [];
  if (!Array.isArray(samples)) return out;
  for (let i = samples.length - 1; i > 0; i -= 1) {
    const a = samples[i];
    const b = samples[i - 1];
    const dt = (b.timestamp - a.timestamp) / 1000;
    if (dt > 0) out.push({ t: b.timestamp, v: Math.max(0, (b.sample - a.sample) / dt) });
  }
  return out;
}

// API samples of a level (queue length) -> points, oldest first.
export function levelsFromSamples(samples) {
  if (!Array.isArray(samples)) return [];
  return samples.slice().reverse().map((s) => ({ t: s.timestamp, v: s.sample }));
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  const m = v / p;
  const step = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
  return step * p;
}

function tickLabel(v, unit) {
  const s = v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : `${Math.round(v * 100) / 100}`;
  return unit ? `${s}${unit}` : s;
}

// "-45 s", "-3 min": how long before `now` time t was.
export function agoLabel(t, now) {
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'now';
  if (s < 120) return `-${s} s`;
  return `-${Math.round(s / 60)} min`;
}

// The span of the points of every series: [first, last] times, or null
// with fewer than two distinct times (nothing to draw a line over).
export function spanOf(data) {
  let t0 = Infinity;
  let t1 = -Infinity;
  data.forEach((pts) => pts.forEach((p) => { t0 = Math.min(t0, p.t); t1 = Math.max(t1, p.t); }));
  return t1 > t0 ? [t0, t1] : null;
}

// The runs of a series drawn as one line: a new run starts where two
// points are further apart than twice the series' smallest step.
export function runsOf(pts) {
  let step = Infinity;
  for (let i = 1; i < pts.length; i += 1) step = Math.min(step, pts[i].t - pts[i - 1].t);
  const runs = [];
  pts.forEach((p, i) => {
    if (!i || p.t - pts[i - 1].t > 2 * step) runs.push([]);
    runs[runs.length - 1].push(p);
  });
  return runs;
}

// createChart(title, series, {unit, format}) -> {el, update(data, latest)}
// where series is [{label, color}], data one point array per series
// (oldest first) and latest the value per series the legend shows (the
// newest point's when not given).
export function createChart(title, series, opts = {}) {
  const canvas = h('canvas', { role: 'img', 'aria-label': title });
  const legendValues = series.map(() => h('span', { class: 'legend-value' }, '–'));
  const legend = h('ul', { class: 'legend' }, series.map((s, i) => h('li', {},
    swatch(s.color || COLORS.blue, DASHES[i % DASHES.length]), h('span', {}, s.label), legendValues[i])));
  const el = h('figure', { class: 'chart' }, h('figcaption', {}, title), h('div', { class: 'chart-canvas' }, canvas), legend);
  let data = series.map(() => []);

  function draw() {
    const rect = canvas.getBoundingClientRect();
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(100, rect.width);
    const ht = Math.max(80, rect.height);
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(ht * ratio);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, ht);
    const left = 52;
    const bottom = ht - 20;
    const top = 8;
    const right = w - 8;
    let max = 0;
    data.forEach((pts) => pts.forEach((p) => { if (p.v > max) max = p.v; }));
    const ymax = niceMax(max);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#5b6573';
    ctx.strokeStyle = '#e3e7ec';
    ctx.lineWidth = 1;
    for (let i = 0; i <= 4; i += 1) {
      const y = bottom - ((bottom - top) * i) / 4;
      ctx.beginPath(); ctx.moveTo(left, y + 0.5); ctx.lineTo(right, y + 0.5); ctx.stroke();
      ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
      ctx.fillText(tickLabel((ymax * i) / 4, opts.unit), left - 6, y);
    }
    const span = spanOf(data);
    ctx.textBaseline = 'top';
    if (!span) {
      ctx.textAlign = 'center';
      ctx.fillText('No samples yet', (left + right) / 2, bottom + 5);
      return;
    }
    const [t0, t1] = span;
    const now = Date.now();
    const ticks = Math.max(1, Math.min(4, Math.floor((right - left) / 80)));
    for (let i = 0; i <= ticks; i += 1) {
      const x = left + ((right - left) * i) / ticks;
      ctx.textAlign = i === 0 ? 'left' : i === ticks ? 'right' : 'center';
      ctx.fillText(agoLabel(t0 + ((t1 - t0) * i) / ticks, now), x, bottom + 5);
    }
    const xOf = (t) => left + ((t - t0) / (t1 - t0)) * (right - left);
    const yOf = (v) => bottom - (v / ymax) * (bottom - top);
    data.forEach((pts, i) => {
      ctx.strokeStyle = series[i].color || COLORS.blue;
      ctx.lineWidth = 2;
      ctx.setLineDash(DASHES[i % DASHES.length]);
      runsOf(pts).forEach((run) => {
        ctx.beginPath();
        run.forEach((p, j) => (j ? ctx.lineTo(xOf(p.t), yOf(p.v)) : ctx.moveTo(xOf(p.t), yOf(p.v))));
        ctx.stroke();
      });
      ctx.setLineDash([]);
    });
  }

  function update(newData, latest) {
    data = newData.map((pts) => pts || []);
    const shown = data.map((pts, i) => {
      const v = latest ? latest[i] : undefined;
      if (v !== undefined && v !== null) return v;
      return pts.length ? pts[pts.length - 1].v : null;
    });
    const fmt = opts.format || ((v) => String(v));
    shown.forEach((v, i) => { legendValues[i].textContent = v === null ? '–' : fmt(v); });
    el.dataset.latest = JSON.stringify(shown);
    el.dataset.points = String(data.reduce((n, pts) => n + pts.length, 0));
    el.dataset.series = JSON.stringify(data.map((pts) => pts.map((p) => [p.t, p.v])));
    el.dataset.span = JSON.stringify(spanOf(data));
    canvas.setAttribute('aria-label', `${title}: ${series.map((s, i) => `${s.label} ${legendValues[i].textContent}`).join(', ')}`);
    if (el.isConnected) draw();
  }

  new ResizeObserver(() => { if (el.isConnected) draw(); }).observe(canvas);
  return { el, update };
}

function swatch(color, dash) {
  const c = h('canvas', { class: 'swatch', width: 28, height: 10, 'aria-hidden': 'true' });
  const ctx = c.getContext('2d');
  ctx.strokeStyle = color;
  ctx.lineWidth = 2.5;
  ctx.setLineDash(dash);
  ctx.beginPath(); ctx.moveTo(1, 5); ctx.lineTo(27, 5); ctx.stroke();
  return c;
}
