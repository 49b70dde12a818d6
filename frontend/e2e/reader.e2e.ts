// The reader against the real server and a loopback publisher: subscribe
// through discovery, read/star/bookmark by keyboard, mark all read while a
// later item stays unread, search, OPML import, settings — with axe on
// every page and screenshots light/dark, desktop/phone.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  FeedServer,
  cookieOf,
  expectNoAxeViolations,
  gql,
  launchBrowser,
  openSession,
  screenshot,
  signIn,
  startServer,
  type Session,
  type TrellisServer,
} from './harness';

let server: TrellisServer;
let browser: Browser;
let publisher: FeedServer;
let session: Session;
let page: Page;
let cookie: string;

async function unreadOf(title: string): Promise<boolean> {
  const data = await gql<{ items: { nodes: { title: string; unread: boolean }[] } }>(
    server,
    'query { items(first: 100) { nodes { title unread } } }',
    {},
    cookie,
  );
  const item = data.items.nodes.find((node) => node.title === title);
  if (!item) throw new Error(`no item ${title}`);
  return item.unread;
}

async function starredTitles(): Promise<string[]> {
  const data = await gql<{ items: { nodes: { title: string }[] } }>(server, 'query { items(filter: { starred: true }) { nodes { title } } }', {}, cookie);
  return data.items.nodes.map((node) => node.title).sort();
}

/** Whether the app stored the article titled `title` in IndexedDB (never creating the database itself). */
async function storedOnDevice(title: string): Promise<boolean> {
  const names = await indexedDB.databases();
  if (!names.some((entry) => entry.name === 'trellis')) return false;
  return new Promise((resolve) => {
    const opening = indexedDB.open('trellis');
    opening.onerror = () => resolve(false);
    opening.onsuccess = () => {
      const db = opening.result;
      if (!db.objectStoreNames.contains('articles')) {
        db.close();
        return resolve(false);
      }
      const all = db.transaction('articles').objectStore('articles').getAll();
      all.onsuccess = () => {
        db.close();
        resolve((all.result as { title: string }[]).some((article) => article.title === title));
      };
      all.onerror = () => {
        db.close();
        resolve(false);
      };
    };
  });
}

beforeAll(async () => {
  publisher = await new FeedServer().start();
  publisher.add(3);
  [server, browser] = await Promise.all([startServer(), launchBrowser()]);
  session = await openSession(browser, server);
  page = session.page;
  await signIn(page);
  cookie = await cookieOf(session.context);
});

afterAll(async () => {
  await session?.context.close();
  await browser?.close();
  await server?.stop();
  await publisher?.stop();
});

describe('reader', () => {
  test('an empty reader says what to do', async () => {
    await page.getByText('No subscriptions yet').waitFor();
    await expectNoAxeViolations(page, 'the empty reader');
  });

  test('a feed is added through discovery and its articles arrive', async () => {
    await page.getByRole('button', { name: 'Add feed' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add a feed' });
    await dialog.getByLabel('Site or feed address').fill(`${publisher.url}/`);
    await dialog.getByRole('button', { name: 'Find feeds' }).click();
    await dialog.getByRole('radio', { name: /Loopback Gazette/ }).waitFor();
    await expectNoAxeViolations(page, 'the add-feed dialog');
    await dialog.getByRole('button', { name: 'Subscribe' }).click();
    await page.waitForURL(/\/read\/feed\/\d+/);
    // The first pull is due at once; its articles come in live.
    await page.getByRole('option', { name: /Story 3/ }).waitFor({ timeout: 30_000 });
    await page.getByRole('link', { name: /Loopback Gazette/ }).first().waitFor();
    expect(await page.getByRole('option').count()).toBe(3);
  });

  test('j opens and reads, s stars, b bookmarks — and scripts in content never run', async () => {
    await page.getByRole('link', { name: 'All items' }).click();
    await page.getByRole('option', { name: /Story 3/ }).waitFor();
    await page.locator('body').press('j');
    await page.waitForURL(/item=\d+/);
    await page.getByRole('heading', { name: 'Story 3' }).waitFor();
    await expect.poll(() => unreadOf('Story 3')).toBe(false);
    await page.locator('body').press('s');
    await page.getByRole('button', { name: 'Starred' }).waitFor();
    await page.locator('body').press('b');
    await page.getByText('Bookmarked').waitFor();
    const bookmarks = await gql<{ bookmarks: { nodes: { title: string }[] } }>(server, 'query { bookmarks(first: 10) { nodes { title } } }', {}, cookie);
    expect(bookmarks.bookmarks.nodes.map((node) => node.title)).toEqual(['Story 3']);
    const starred = await gql<{ items: { nodes: { title: string }[] } }>(server, 'query { items(filter: { starred: true }) { nodes { title } } }', {}, cookie);
    expect(starred.items.nodes.map((node) => node.title)).toEqual(['Story 3']);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: boolean }).__pwned)).toBeUndefined();
    // Links open elsewhere, without a referrer.
    const rel = await page.locator('.content a').first().getAttribute('rel');
    expect(rel).toContain('noreferrer');
    await page.locator('body').press('j');
    await page.getByRole('heading', { name: 'Story 2' }).waitFor();
    // m toggles read back.
    await page.locator('body').press('m');
    await expect.poll(() => unreadOf('Story 2')).toBe(true);
    await expectNoAxeViolations(page, 'the reader with an article');
    await screenshot(page, 'reader-desktop-light');
  });

  test('offline: an article read before opens again, and a star waits for the network', async () => {
    // Both articles were opened above, so both are stored for offline reading.
    await page.context().setOffline(true);
    await page.locator('body').press('k');
    await page.getByRole('heading', { name: 'Story 3' }).waitFor();
    await page.getByText('Body of story 3').waitFor();
    await page.locator('body').press('j');
    await page.getByRole('heading', { name: 'Story 2' }).waitFor();
    await page.locator('body').press('s');
    await page.getByRole('button', { name: 'Starred' }).waitFor();
    await page.context().setOffline(false);
    // Back online, the queued star reaches the server.
    await expect
      .poll(async () => {
        const data = await gql<{ items: { nodes: { title: string }[] } }>(server, 'query { items(filter: { starred: true }) { nodes { title } } }', {}, cookie);
        return data.items.nodes.map((node) => node.title).sort();
      })
      .toEqual(['Story 2', 'Story 3']);
  });

  test('offline reload: the service worker serves the app, this device the article, and changes made then are sent on reconnect', async () => {
    const device = await openSession(browser, server, { serviceWorkers: 'allow' });
    await device.context.addCookies(await session.context.cookies());
    const { page: tab } = device;
    await tab.goto('/read?show=all');
    // The worker is installed (the app shell and its assets cached) and controls the page.
    await tab.waitForFunction(() => navigator.serviceWorker.controller !== null);
    await tab.getByRole('option', { name: /Story 1/ }).click();
    await tab.getByRole('heading', { name: 'Story 1' }).waitFor();
    await tab.waitForFunction(storedOnDevice, 'Story 1');
    await expect.poll(() => unreadOf('Story 1')).toBe(false);
    const starredBefore = await starredTitles();
    expect(starredBefore).not.toContain('Story 1');

    await device.context.setOffline(true);
    await tab.reload();
    // The page came from the worker; the article from IndexedDB.
    await tab.getByRole('heading', { name: 'Story 1' }).waitFor();
    await tab.getByText('Body of story 1').waitFor();
    expect(await tab.evaluate(() => navigator.onLine)).toBe(false);
    // The keys act on the open article though the list could not load.
    await tab.locator('body').press('s');
    await tab.getByRole('button', { name: 'Starred' }).waitFor();
    await tab.locator('body').press('m');
    await tab.getByRole('button', { name: 'Mark read' }).waitFor();
    expect(await starredTitles()).toEqual(starredBefore);
    expect(await unreadOf('Story 1')).toBe(false);

    await device.context.setOffline(false);
    await expect.poll(starredTitles).toEqual([...starredBefore, 'Story 1'].sort());
    await expect.poll(() => unreadOf('Story 1')).toBe(true);
    expect(device.foreign).toEqual([]);
    expect(device.problems).toEqual([]);
    await device.context.close();
  });

  test('keys typed into the search box stay there', async () => {
    const url = page.url();
    await page.locator('body').press('/');
    await page.keyboard.type('jk');
    expect(page.url()).toBe(url);
    await page.keyboard.press('Escape');
  });

  test('mark all read covers what the page showed; a later article stays unread', async () => {
    await page.goto('/read');
    await page.getByRole('option', { name: /Story 1/ }).waitFor();
    publisher.add(1, 'Late');
    // The sidebar may render after the list: wait for the feed's line.
    await page.locator('.feed-line a').first().waitFor();
    const feedId = await page.evaluate(() => document.querySelector('.feed-line a')?.getAttribute('href')?.split('/').pop());
    await gql(server, 'mutation($id: ID!) { refreshFeed(id: $id) { id } }', { id: feedId }, cookie);
    // The pull is announced live, without reloading the list.
    await page.getByRole('button', { name: /1 new — show/ }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Mark all read' }).click();
    await page.getByText(/marked read/).waitFor();
    expect(await unreadOf('Story 1')).toBe(false);
    expect(await unreadOf('Late 4')).toBe(true);
    await page.getByRole('button', { name: /1 new — show/ }).click();
    await page.getByRole('option', { name: /Late 4/ }).waitFor();
  });

  test('search finds articles, with operators', async () => {
    await page.locator('body').press('/');
    await page.keyboard.type('Story 2 feed:loop');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/read\/search\?q=/);
    await page.getByRole('option', { name: /Story 2/ }).waitFor();
    expect(await page.getByRole('option').count()).toBe(1);
    // ⌘K finds it too.
    await page.keyboard.press('Control+k');
    await page.getByRole('combobox', { name: 'Search or jump to' }).fill('Story 1');
    await page.getByRole('option', { name: /Story 1/ }).waitFor();
    await expectNoAxeViolations(page, 'the command palette');
    await page.keyboard.press('Escape');
  });

  test('an OPML file is imported', async () => {
    const other = await new FeedServer('Second Courier').start();
    other.add(2, 'Courier');
    const file = join(server.dataDir, 'subs.opml');
    await writeFile(
      file,
      `<?xml version="1.0"?><opml version="2.0"><head><title>subs</title></head><body>` +
        `<outline text="Imported"><outline type="rss" text="Second Courier" xmlUrl="${other.url}/feed.xml"/></outline></body></opml>`,
    );
    await page.goto('/read');
    await page.locator('input[type=file]').setInputFiles(file);
    await page.getByText(/Imported: 1 new feed/).waitFor({ timeout: 30_000 });
    await page.getByRole('link', { name: /Second Courier/ }).waitFor();
    await other.stop();
  });

  test('settings: every section passes axe; theme and keys apply', async () => {
    for (const section of ['account', 'apps', 'appearance', 'reading', 'keyboard']) {
      await page.goto(`/settings/${section}`);
      await page.getByRole('heading', { level: 2 }).first().waitFor();
      await expectNoAxeViolations(page, `settings/${section}`);
    }
    for (const path of ['/docs', '/gateway']) {
      await page.goto(path);
      await page.getByRole('heading', { level: 1 }).waitFor();
      await expectNoAxeViolations(page, path);
    }
    await page.goto('/settings/appearance');
    await page.getByLabel('Dark').check();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    await page.goto('/read');
    await page.getByRole('option').first().waitFor();
    await expectNoAxeViolations(page, 'the reader, dark');
    await screenshot(page, 'reader-desktop-dark');
    await page.goto('/settings/appearance');
    await page.getByLabel('Same as the system').check();
  });

  test('phone: the list, then the article full screen', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const phone = await openSession(browser, server, { width: 390, height: 844, colorScheme: scheme });
      await phone.context.addCookies(await session.context.cookies());
      await phone.page.goto('/read?show=all');
      await phone.page.getByRole('option').first().click();
      await phone.page.getByRole('button', { name: 'Back' }).waitFor();
      // The article itself, not its loading state, is what axe should see.
      await phone.page.locator('#article-title').waitFor();
      await expectNoAxeViolations(phone.page, `the phone article (${scheme})`);
      await screenshot(phone.page, `reader-phone-${scheme}`);
      await phone.page.getByRole('button', { name: 'Back' }).click();
      await phone.page.getByRole('option').first().waitFor();
      await screenshot(phone.page, `list-phone-${scheme}`);
      expect(phone.foreign).toEqual([]);
      await phone.context.close();
    }
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
  });
});
