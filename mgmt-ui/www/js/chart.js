// A small canvas line chart for the API's samples: time on x over a fixed
// window, values on y from 0 to a rounded maximum. Each series has a colour
// from the Okabe-Ito palette (distinguishable with the common colour-vision
// deficiencies) and its own dash pattern, and the legend repeats each
// series' latest value as text, so no meaning rests on colour alone.
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

// createChart(title, series, {unit, windowMs, format}) -> {el, update(data)}
// where series is [{label, color}] and data is one point array per series.
export function createChart(title, series, opts = {}) {
  const windowMs = opts.windowMs || 600000;
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
    const now = Date.now();
    const t0 = now - windowMs;
    let max = 0;
    data.forEach((pts) => pts.forEach((p) => { if (p.t >= t0 && p.v > max) max = p.v; }));
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
    ctx.textBaseline = 'top';
    const minutes = windowMs / 60000;
    const ticks = Math.max(1, Math.min(5, Math.floor((right - left) / 70)));
    for (let i = 0; i <= ticks; i += 1) {
      const x = left + ((right - left) * i) / ticks;
      const ago = Math.round(minutes - (minutes * i) / ticks);
      ctx.textAlign = i === 0 ? 'left' : i === ticks ? 'right' : 'center';
      ctx.fillText(ago === 0 ? 'now' : `-${ago} min`, x, bottom + 5);
    }
    const xOf = (t) => left + ((t - t0) / windowMs) * (right - left);
    const yOf = (v) => bottom - (v / ymax) * (bottom - top);
    data.forEach((pts, i) => {
      ctx.strokeStyle = series[i].color || COLORS.blue;
      ctx.lineWidth = 2;
      ctx.setLineDash(DASHES[i % DASHES.length]);
      ctx.beginPath();
      let started = false;
      pts.forEach((p) => {
        if (p.t < t0) return;
        const x = xOf(p.t);
        const y = yOf(p.v);
        if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
      });
      ctx.stroke();
      ctx.setLineDash([]);
    });
  }

  function update(newData) {
    data = newData.map((pts) => pts || []);
    const latest = data.map((pts) => (pts.length ? pts[pts.length - 1].v : null));
    const fmt = opts.format || ((v) => String(v));
    latest.forEach((v, i) => { legendValues[i].textContent = v === null ? '–' : fmt(v); });
    el.dataset.latest = JSON.stringify(latest);
    el.dataset.points = String(data.reduce((n, pts) => n + pts.length, 0));
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
