// The live dashboard against the real server: the tree follows a resource
// change without a reload, a resource form shows its task to the end, and
// the tasks view follows a task's stages live. axe on every view.
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { cookieOf, expectNoAxeViolations, gql, launchBrowser, openSession, screenshot, signIn, startServer, type Session, type TrellisServer } from './harness';

let server: TrellisServer;
let browser: Browser;
let session: Session;
let page: Page;
let cookie: string;

async function createResource(attributes: object, key: string): Promise<string> {
  const data = await gql<{ createResource: { id: string } }>(
    server,
    'mutation($a: JSON!, $k: String!) { createResource(attributes: $a, idempotencyKey: $k) { id } }',
    { a: attributes, k: key },
    cookie,
  );
  return data.createResource.id;
}

/** Waits for a task to end (polling its state, as a client would) and returns its status. */
async function waitTask(id: string): Promise<string> {
  return vi.waitFor(
    async () => {
      const data = await gql<{ task: { status: string } }>(server, 'query($id: ID!) { task(id: $id) { status } }', { id }, cookie);
      if (!['SUCCEEDED', 'FAILED', 'SUPERSEDED', 'CANCELLED'].includes(data.task.status)) throw new Error(`still ${data.task.status}`);
      return data.task.status;
    },
    { timeout: 30_000, interval: 50 },
  );
}

const instance = (name: string, health: number) => ({
  region: 'eu-west', zone: 'a', cluster: 'k1', namespace: 'shop', service: 'cart', instance: name, health,
});

beforeAll(async () => {
  [server, browser] = await Promise.all([startServer(), launchBrowser()]);
  session = await openSession(browser, server);
  page = session.page;
  await signIn(page);
  cookie = await cookieOf(session.context);
  for (const [n, health] of [[1, 0], [2, 0]] as const) {
    expect(await waitTask(await createResource(instance(`cart-${n}`, health), `seed-${n}`))).toBe('SUCCEEDED');
  }
});

afterAll(async () => {
  await session?.context.close();
  await browser?.close();
  await server?.stop();
});

describe('live dashboard', () => {
  test('a resource update changes the node’s status on the open tree, without a reload', async () => {
    const nodes = await gql<{ nodes: { nodes: { id: string; positionToken: string }[] } }>(
      server,
      '{ nodes(filter: { class: "instance" }) { nodes { id positionToken } } }',
      {},
      cookie,
    );
    const target = nodes.nodes.nodes.find((node) => node.positionToken === 'cart-2')!;
    await page.goto(`/live/node/${target.id}`);
    const row = page.getByRole('treeitem', { name: /^cart-2, instance/ });
    await expect.poll(() => row.getAttribute('aria-label')).toBe('cart-2, instance, healthy');
    // The root's row says the same in words, icon and colour.
    await page.getByRole('treeitem', { name: /^eu-west, region, healthy/ }).waitFor();
    await expectNoAxeViolations(page, 'the live tree');
    const resources = await gql<{ resources: { nodes: { id: string; attributes: { instance: string } }[] } }>(
      server,
      '{ resources(first: 10) { nodes { id attributes } } }',
      {},
      cookie,
    );
    const resource = resources.resources.nodes.find((entry) => entry.attributes.instance === 'cart-2')!;
    const marker = await page.evaluate(() => ((window as unknown as { __sameDocument: number }).__sameDocument = Date.now()));
    await gql(server, 'mutation($id: ID!) { updateResourceA(id: $id, patch: { health: 2 }, idempotencyKey: "fail-2") { id } }', { id: resource.id }, cookie);
    await expect.poll(() => row.getAttribute('aria-label'), { timeout: 20_000 }).toBe('cart-2, instance, failing');
    await page.getByRole('treeitem', { name: /^eu-west, region, failing/ }).waitFor();
    expect(await page.evaluate(() => (window as unknown as { __sameDocument: number }).__sameDocument)).toBe(marker);
    await screenshot(page, 'live-desktop-light');
  });

  test('the keyboard walks the tree; problems-only hides healthy branches', async () => {
    await page.getByRole('tree').focus();
    await page.keyboard.press('Home');
    await expect.poll(() => page.locator('[role=treeitem][aria-selected=true]').getAttribute('aria-label')).toMatch(/^eu-west, region/);
    await page.keyboard.press('ArrowDown');
    await expect.poll(() => page.locator('[role=treeitem][aria-selected=true]').getAttribute('aria-label')).toMatch(/^a, zone/);
    await page.getByRole('button', { name: 'Problems only' }).click();
    await page.getByRole('treeitem', { name: /^cart-2, instance, failing/ }).waitFor();
    expect(await page.getByRole('treeitem', { name: /^cart-1,/ }).count()).toBe(0);
    await page.getByRole('button', { name: 'Problems only' }).click();
    await page.getByRole('treeitem', { name: /^cart-1,/ }).waitFor();
  });

  test('a resource form shows its task, live, to the end', async () => {
    await page.getByRole('link', { name: 'Resources' }).click();
    await page.getByRole('heading', { name: 'Create a resource' }).waitFor();
    await expectNoAxeViolations(page, 'the resources view');
    await page.getByRole('button', { name: /^Update A resource/ }).first().click();
    await page.getByLabel('Patch (JSON merge patch)').fill('{ "health": 1 }');
    await page.getByRole('button', { name: 'Update A', exact: true }).click();
    const card = page.locator('.task-card').first();
    await expect.poll(() => card.locator('.task-status').textContent(), { timeout: 20_000 }).toBe('SUCCEEDED');
    await expect.poll(() => card.getByRole('progressbar').getAttribute('aria-valuetext')).toBe('7 of 7 stages');
    await screenshot(page, 'resources-desktop-light');
  });

  test('the tasks view follows a task’s stages live', async () => {
    await page.getByRole('link', { name: 'Tasks' }).click();
    await page.getByRole('heading', { name: 'Queues' }).waitFor();
    await page.getByText('Newest tasks').waitFor();
    const probe = await gql<{ probeTask: { id: string } }>(
      server,
      'mutation { probeTask(input: { stages: 3, sleepMs: 200 }) { id } }',
      {},
      cookie,
    );
    const row = page.locator(`tr[data-task="${probe.probeTask.id}"]`);
    await row.waitFor({ timeout: 20_000 });
    await expect.poll(() => row.locator('.task-status').textContent(), { timeout: 20_000 }).toBe('SUCCEEDED');
    await expect.poll(() => row.getByRole('progressbar').getAttribute('aria-valuetext')).toBe('3 of 3 stages');
    await expectNoAxeViolations(page, 'the tasks view');
    await screenshot(page, 'tasks-desktop-light');
    for (const scheme of ['light', 'dark'] as const) {
      const phone = await openSession(browser, server, { width: 390, height: 844, colorScheme: scheme });
      await phone.context.addCookies(await session.context.cookies());
      await phone.page.goto('/live');
      await phone.page.getByRole('tree').waitFor();
      await expectNoAxeViolations(phone.page, `the live tree on a phone (${scheme})`);
      await screenshot(phone.page, `live-phone-${scheme}`);
      await phone.context.close();
    }
    const dark = await openSession(browser, server, { colorScheme: 'dark' });
    await dark.context.addCookies(await session.context.cookies());
    await dark.page.goto('/live');
    await dark.page.getByRole('tree').waitFor();
    await expectNoAxeViolations(dark.page, 'the live tree, dark');
    await screenshot(dark.page, 'live-desktop-dark');
    await dark.context.close();
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
  });
});
