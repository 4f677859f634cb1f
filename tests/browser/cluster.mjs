// The Cluster panel's browser tests (issue 21), run by run.mjs against a
// real cluster that run.sh starts (one etcd, three Warren nodes on
// 127.0.0.1): CLUSTER_BASE is its leader's console. The overview must show
// the cluster's name, leader, epoch, in-sync replicas against min_isr,
// whether confirms are held, and one row per node with its role, ISR
// membership and lag -- the leader's /api/cluster as a person reads it --
// and the Node panel this node's facts only. A single node's overview has
// no Cluster panel. Without CLUSTER_BASE (a console under test that is not
// a cluster, e.g. RabbitMQ through the dev proxy) the tests are skipped.
import { login } from './browser.mjs';

export async function clusterTests(t) {
  const { test, assert, waitFor, page, shot, go, ADMIN, skip } = t; // run.mjs's
  const CLUSTER_BASE = process.env.CLUSTER_BASE || '';
  const text = async (loc) => (await loc.innerText()).replace(/\s+/g, ' ').trim();

  await test("a single node's overview has no Cluster panel", async () => {
    await login(page, t.BASE, ...ADMIN);
    await page.waitForSelector('#logout');
    await go('');
    await page.waitForSelector('#node dl.facts');
    assert(await page.locator('#cluster').count() === 0, 'a Cluster panel on a single node');
    await page.click('#logout');
  });

  if (!CLUSTER_BASE) {
    skip("a cluster's leader shows its nodes, roles, ISR, lag and epoch", 'no cluster (CLUSTER_BASE)');
    return;
  }

  await test("a cluster's leader shows its nodes, roles, ISR, lag and epoch", async () => {
    const auth = `Basic ${Buffer.from(ADMIN.join(':')).toString('base64')}`;
    const st = await (await fetch(`${CLUSTER_BASE}/api/cluster`, { headers: { Authorization: auth } })).json();
    assert(st.role === 'leader' && st.nodes.length === 3, `the cluster under test: ${JSON.stringify(st)}`);
    await login(page, CLUSTER_BASE, ...ADMIN);
    await page.waitForSelector('#logout');
    await page.waitForSelector('#cluster #cluster-nodes tbody tr');
    const facts = await text(page.locator('#cluster dl.facts'));
    assert(facts.includes(`Cluster ${st.cluster_name}`), `cluster name: ${facts}`);
    assert(facts.includes(`Leader ${st.leader}`), `leader: ${facts}`);
    assert(new RegExp(`Epoch ${st.epoch}\\b`).test(facts), `epoch: ${facts}`);
    assert(facts.includes('In-sync replicas 3 (min 2)'), `ISR: ${facts}`);
    assert(facts.includes('Confirms flowing'), `confirms: ${facts}`);
    const rows = page.locator('#cluster-nodes tbody tr');
    assert(await rows.count() === 3, `rows: ${await rows.count()}`);
    for (const n of st.nodes) {
      const row = rows.filter({ has: page.locator('td', { hasText: n.name }) });
      assert(await row.count() === 1, `a row for ${n.name}`);
      const cells = await row.locator('td').allInnerTexts();
      assert(cells[1].trim() === n.role, `${n.name} role: ${cells[1]}`);
      assert(cells[2].trim() === 'in sync', `${n.name} in sync: ${cells[2]}`);
      assert(cells[3].trim() === 'yes', `${n.name} alive: ${cells[3]}`);
      assert(/^\d[\d,.]* (B|KiB|MiB)$/.test(cells[5].trim()), `${n.name} lag: ${cells[5]}`);
      assert(/ms$|s$/.test(cells[6].trim()), `${n.name} lag time: ${cells[6]}`);
    }
    // the Node panel: the leader's own facts, not three half-empty ones
    await waitFor('the node facts', () => page.locator('#node dl.facts').count());
    assert(await page.locator('#node dl.facts').count() === 1, 'one node in the Node panel');
    assert((await text(page.locator('#node dl.facts'))).includes(st.leader), 'the leader in the Node panel');
    await shot('20-cluster-overview');
    await page.setViewportSize({ width: 480, height: 900 });
    await page.waitForTimeout(300);
    const label = await page.locator('#cluster-nodes tbody tr td').nth(1).getAttribute('data-label');
    assert(label === 'Role', `a phone shows each node as a card, its cells labelled (${label})`);
    await shot('21-cluster-overview-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.click('#logout');
  });

  if (!process.env.CLUSTER_FOLLOWER) {
    skip("a follower's page shows the cluster", 'no follower (CLUSTER_FOLLOWER)');
    return;
  }
  await test("a follower's page shows the cluster, its lag from the leader's view", async () => {
    const base = process.env.CLUSTER_FOLLOWER;
    await page.goto(`${base}/`);
    assert(await page.locator('#cluster').isHidden(), 'the cluster shown without a login');
    await page.fill('#user', ADMIN[0]);
    await page.fill('#pass', ADMIN[1]);
    await page.click('#login button');
    await page.waitForSelector('#cluster-nodes tbody tr');
    const facts = await text(page.locator('#facts'));
    assert(/This node warren@console-n\d \(follower\)/.test(facts), `this node: ${facts}`);
    assert(/Leader warren@console-n\d/.test(facts), `leader: ${facts}`);
    assert(/Epoch \d+/.test(facts) && facts.includes('In-sync replicas 3 (min 2)'), `facts: ${facts}`);
    // the leader's view reaches a follower through etcd within a second or two
    await waitFor('confirms flowing', async () => (await text(page.locator('#facts'))).includes('Confirms flowing'));
    const rows = page.locator('#cluster-nodes tbody tr');
    assert(await rows.count() === 3, `rows: ${await rows.count()}`);
    await waitFor('a lag figure for every node', async () => {
      const lags = await page.locator('#cluster-nodes td[data-label="Lag"]').allInnerTexts();
      return lags.length === 3 && lags.every((l) => /^\d[\d.]* (B|KiB|MiB)$/.test(l.trim()));
    });
    const roles = await page.locator('#cluster-nodes td[data-label="Role"]').allInnerTexts();
    assert(roles.filter((r) => r.trim() === 'leader').length === 1 &&
           roles.filter((r) => r.trim() === 'follower').length === 2, `roles: ${roles}`);
    await shot('22-cluster-follower-page');
    await page.click('#logout');
    assert(await page.locator('#login').isVisible(), 'logged out');
  });
}
