// Who is logged in and what they may do. The tags decide what the console
// offers; the API decides what is allowed (it refuses with 401 not_authorised, as RabbitMQ, whatever the
// console shows), so hiding a button is a courtesy, not the protection.

export const MGMT_TAGS = ['management', 'policymaker', 'monitoring', 'administrator'];

export const session = {
  user: null,
  tags: [],
  vhost: sessionStorage.getItem('warren.vhost') || '', // '' = all vhosts
  vhosts: [],
  overview: null,
};

export function parseTags(tags) {
  if (Array.isArray(tags)) return tags;
  return String(tags || '').split(',').map((t) => t.trim()).filter(Boolean);
}

export function isAdmin() {
  return session.tags.includes('administrator');
}

// Policies may be changed by policymakers and administrators.
export function canPolicies() {
  return isAdmin() || session.tags.includes('policymaker');
}

// Monitoring and administrators see every vhost's connections and node facts.
export function canMonitor() {
  return isAdmin() || session.tags.includes('monitoring');
}

export function hasManagementTag(tags) {
  return tags.some((t) => MGMT_TAGS.includes(t));
}

export function setVhost(v) {
  session.vhost = v;
  sessionStorage.setItem('warren.vhost', v);
}
