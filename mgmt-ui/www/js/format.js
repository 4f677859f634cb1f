// Number, size, rate and time formatting: one place so every table and panel
// shows the same units. Missing values render as an en dash, never "undefined".

const DASH = '–';
const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 0 });

export function num(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return DASH;
  return intFmt.format(v);
}

// A message rate: "12.3/s"; rates under 0.05 show as 0.0/s.
export function rate(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return DASH;
  const a = Math.abs(v);
  if (a >= 1000) return `${intFmt.format(v)}/s`;
  return `${(Math.round(v * 10) / 10).toFixed(1)}/s`;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function bytes(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return DASH;
  let n = v;
  let i = 0;
  while (Math.abs(n) >= 1024 && i < UNITS.length - 1) { n /= 1024; i += 1; }
  return i === 0 ? `${intFmt.format(n)} B` : `${decFmt.format(n)} ${UNITS[i]}`;
}

// A duration in milliseconds: "850 ms", "12 s", "3 min 4 s", "2 h 5 min", "3 d 4 h".
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return DASH;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function time(ts) {
  if (!ts) return DASH;
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
}

// Reads a dotted path ("message_stats.publish_details.rate") from an object.
export function pick(obj, path) {
  let cur = obj;
  for (const part of path.split('.')) {
    if (cur === null || cur === undefined) return undefined;
    cur = cur[part];
  }
  return cur;
}

export function plural(n, one, many) {
  return `${num(n)} ${n === 1 ? one : many || `${one}s`}`;
}
