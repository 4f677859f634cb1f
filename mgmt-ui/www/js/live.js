// Live refresh: one timer for the whole console. The page on screen
// registers its refresh function; the timer calls it every N seconds while
// the tab is visible, never while a previous refresh is still running, and
// once straight away when the tab becomes visible again. Interval choice is
// kept in localStorage (a preference, not a secret).

const KEY = 'warren.refresh';
export const INTERVALS = [[0, 'Off'], [5, 'Every 5 s'], [10, 'Every 10 s'], [30, 'Every 30 s'], [60, 'Every 60 s']];

let seconds = Number(localStorage.getItem(KEY) ?? 5);
let timer = null;
let current = null;
let running = false;

async function tick() {
  if (!current || running || document.visibilityState !== 'visible') return;
  running = true;
  const fn = current;
  try {
    await fn();
  } catch (e) {
    // Each page shows its own errors; the timer keeps going.
  } finally {
    running = false;
  }
}

function restart() {
  if (timer) clearInterval(timer);
  timer = seconds > 0 ? setInterval(tick, seconds * 1000) : null;
}

export function getInterval() {
  return seconds;
}

export function setInterval_(s) {
  seconds = Number(s);
  localStorage.setItem(KEY, String(seconds));
  restart();
}

// Registers fn as the page's refresh (replacing the previous page's).
export function watch(fn) {
  current = fn;
}

export function unwatch() {
  current = null;
}

// Runs the current refresh now (after an action changed something).
export function refreshNow() {
  return tick();
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') tick();
});
restart();
