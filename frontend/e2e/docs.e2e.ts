// The docs browser against the real server and a loopback fake Notion
// (two pages, one with a block Notion's markdown endpoint could not
// render, and a folder of meeting notes, more than a page of search
// results): the empty mirror first, then the admin presses "Sync now" and
// sees it finish, walks the tree with the keyboard only, opens a document
// with its degradation badge and backlink, searches and pages through the
// results, runs the doctor. axe on the page, light and dark.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { closeLoopback, cookieOf, expectNoAxeViolations, gql, launchBrowser, listenLoopback, openSession, screenshot, signIn, startServer, type Session, type TrellisServer } from './harness';

const ROOT = '11111111-1111-1111-1111-111111111111';
const CHILD = '22222222-2222-2222-2222-222222222222';
const EDITED = '2026-12-01T10:00:00.000Z';
const MEETINGS = '33333333-3333-3333-3333-333333333333';
/** More meeting notes than one page of search results (20). */
const NOTES = Array.from({ length: 22 }, (_, n) => ({
  id: `44444444-4444-4444-4444-${String(n).padStart(12, '0')}`,
  title: `Standup ${String(n + 1).padStart(2, '0')}`,
}));

function page(id: string, title: string, parent: unknown) {
  return {
    object: 'page',
    id,
    created_time: EDITED,
    last_edited_time: EDITED,
    in_trash: false,
    archived: false,
    parent,
    url: `https://www.notion.so/${title}-${id.replace(/-/g, '')}`,
    properties: { title: { id: 'title', type: 'title', title: [{ type: 'text', text: { content: title }, plain_text: title }] } },
  };
}

/** A page's markdown, by its id without dashes. */
function bodyOf(id: string): string {
  const note = NOTES.find((each) => each.id.replace(/-/g, '') === id);
  if (note) return `What the team said at ${note.title}: the weekly standup went fine.\n`;
  if (id === MEETINGS.replace(/-/g, '')) return 'Notes from our meetings.\n';
  if (id === ROOT.replace(/-/g, '')) {
    return `Welcome to the handbook.\n\nSee the [Roadmap](https://www.notion.so/Roadmap-${CHILD.replace(/-/g, '')}).\n\n<unknown url="https://www.notion.so/Handbook-${id}#77777777777777777777777777777777" alt="synced_block"/>\n`;
  }
  return 'The quarterly plan: ship the docs browser.\n\n<img src="x.png" onerror="window.__ran = 1"><script>window.__ran = 2</script>\n';
}

/** Notion as the mirror reads it: search, each page's markdown, the token check. */
class FakeNotion {
  private server: Server = createServer((request, response) => void this.handle(request, response));
  url = '';
  readonly requests: string[] = [];

  async start(): Promise<this> {
    this.url = await listenLoopback(this.server);
    return this;
  }

  stop(): Promise<void> {
    return closeLoopback(this.server);
  }

  private json(response: ServerResponse, status: number, body: unknown) {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    response.end(JSON.stringify(body));
  }

  private async handle(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url);
    this.requests.push(`${request.method} ${url.pathname}`);
    for await (const _ of request) void _;
    if (request.method === 'POST' && url.pathname === '/v1/search') {
      this.json(response, 200, {
        object: 'list',
        results: [
          page(CHILD, 'Roadmap', { type: 'page_id', page_id: ROOT }),
          page(ROOT, 'Handbook', { type: 'workspace', workspace: true }),
          page(MEETINGS, 'Meetings', { type: 'workspace', workspace: true }),
          ...NOTES.map((note) => page(note.id, note.title, { type: 'page_id', page_id: MEETINGS })),
        ],
        has_more: false,
        next_cursor: null,
      });
      return;
    }
    const markdown = /^\/v1\/pages\/([0-9a-f-]+)\/markdown$/.exec(url.pathname);
    if (request.method === 'GET' && markdown) {
      const body = bodyOf(markdown[1].replace(/-/g, ''));
      this.json(response, 200, { object: 'page_markdown', id: markdown[1], markdown: body, truncated: false, unknown_block_ids: [] });
      return;
    }
    if (request.method === 'GET' && url.pathname === '/v1/users/me') {
      this.json(response, 200, { object: 'user', id: '99999999-9999-9999-9999-999999999999', type: 'bot', name: 'e2e' });
      return;
    }
    this.json(response, 404, { object: 'error', status: 404, code: 'object_not_found', message: 'not here' });
  }
}

let notion: FakeNotion;
let server: TrellisServer;
let browser: Browser;
let session: Session;
let page_: Page;

beforeAll(async () => {
  [notion, browser] = await Promise.all([new FakeNotion().start(), launchBrowser()]);
  server = await startServer({
    TRELLIS_NOTION_TOKEN: 'secret_e2e',
    TRELLIS_NOTION_API_URL: notion.url,
    TRELLIS_NOTION_QPS: '1000',
    TRELLIS_DOCS_SYNC_INTERVAL: '0',
  });
  session = await openSession(browser, server);
  page_ = session.page;
  await signIn(page_);
});

afterAll(async () => {
  await session?.context.close();
  await browser?.close();
  await server?.stop();
  await notion?.stop();
});

describe('docs page', () => {
  test('the empty mirror says so, and passes axe', async () => {
    await page_.goto('/docs');
    await page_.getByRole('heading', { level: 2, name: 'The Notion mirror is empty' }).waitFor();
    await page_.getByText('No sync has run yet.').waitFor();
    await expectNoAxeViolations(page_, 'the docs page, empty');
  });

  test('sync now, then the tree, a document, search and the doctor', async () => {
    await page_.getByRole('button', { name: 'Sync now' }).click();
    await page_.getByText('The sync finished.').waitFor({ timeout: 30_000 });
    expect(notion.requests).toContain('POST /v1/search');
    // The runs and the tree read again.
    await page_.locator('.run-status', { hasText: 'succeeded' }).first().waitFor();
    // The tree, by keyboard only: one tab stop; a letter finds Handbook,
    // Right opens it (its entries load then), Down moves to its page.
    const tree = page_.getByRole('tree', { name: 'Notion documents' });
    await tree.getByRole('treeitem', { name: /^Handbook/ }).waitFor();
    expect(await tree.locator('[role="treeitem"][tabindex="0"]').count()).toBe(1);
    await page_.getByRole('button', { name: 'Feishu' }).focus();
    await page_.keyboard.press('Tab');
    expect(await page_.evaluate(() => document.activeElement?.getAttribute('role'))).toBe('treeitem');
    await page_.keyboard.press('h');
    const handbook = tree.getByRole('treeitem', { name: /^Handbook/ });
    await page_.waitForFunction(() => document.activeElement?.querySelector('a')?.textContent === 'Handbook');
    expect(await handbook.getAttribute('aria-expanded')).toBe('false');
    await page_.keyboard.press('ArrowRight');
    const roadmap = tree.getByRole('treeitem', { name: /^Roadmap/ });
    await roadmap.waitFor();
    expect(await handbook.getAttribute('aria-expanded')).toBe('true');
    expect(await roadmap.getAttribute('aria-level')).toBe('2');
    // The live progress reached its last step.
    expect(await page_.getByRole('list', { name: 'Sync progress' }).textContent()).toContain('Finished');
    await expectNoAxeViolations(page_, 'the docs page after a sync');
    await screenshot(page_, 'docs-desktop-light');
    await page_.keyboard.press('ArrowDown');
    await page_.waitForFunction(() => document.activeElement?.querySelector('a')?.textContent === 'Roadmap');
    expect(await roadmap.getAttribute('tabindex')).toBe('0');
    await page_.keyboard.press('Enter');
    await page_.getByRole('heading', { level: 1, name: 'Roadmap' }).waitFor();
    expect(new URL(page_.url()).pathname.startsWith('/docs/notion/')).toBe(true);

    await page_.goto('/docs');
    await page_.getByRole('link', { name: 'Handbook' }).first().click();
    await page_.getByRole('heading', { level: 1, name: 'Handbook' }).waitFor();
    expect(page_.url()).toContain('/docs/notion/');
    await page_.getByText('Welcome to the handbook.').waitFor();
    expect(await page_.locator('.doc-body .degraded').count()).toBeGreaterThan(0);
    await page_.getByRole('note', { name: 'Degradations' }).waitFor();
    // The frontmatter's online URL opens outside, without a referrer.
    expect(await page_.getByRole('link', { name: /^https:\/\/www\.notion\.so\/Handbook/ }).getAttribute('rel')).toBe('noopener noreferrer');
    // The link to the other page leads to its document, under /docs.
    await page_.locator('.doc-body').getByRole('link', { name: 'Roadmap' }).click();
    await page_.getByRole('heading', { level: 1, name: 'Roadmap' }).waitFor();
    expect(new URL(page_.url()).pathname.startsWith('/docs/notion/')).toBe(true);
    await page_.getByText('The quarterly plan').waitFor();
    // Raw HTML in a body is sanitized in the browser: nothing of it runs.
    expect(await page_.locator('.doc-body script, .doc-body [onerror]').count()).toBe(0);
    expect(await page_.evaluate(() => (window as unknown as { __ran?: number }).__ran)).toBeUndefined();
    await page_.getByRole('heading', { level: 2, name: 'Backlinks' }).waitFor();
    await page_.locator('section[aria-labelledby="backlinks"]').getByRole('link', { name: 'Handbook' }).click();
    await page_.getByRole('heading', { level: 1, name: 'Handbook' }).waitFor();
    await expectNoAxeViolations(page_, 'a document');
    await screenshot(page_, 'docs-document-light');

    await page_.goto('/docs');
    await page_.getByLabel('Search the documents').fill('quarterly');
    await page_.keyboard.press('Enter');
    const results = page_.getByRole('list', { name: 'Search results' });
    await results.getByRole('link', { name: 'Roadmap' }).waitFor();
    expect(await results.locator('mark').count()).toBeGreaterThan(0);

    // More hits than a page: "Show more" appends the next page.
    await page_.getByLabel('Search the documents').fill('standup');
    await page_.keyboard.press('Enter');
    await results.getByRole('link', { name: /^Standup/ }).first().waitFor();
    await page_.getByText('20 shown').waitFor();
    expect(await results.getByRole('listitem').count()).toBe(20);
    await page_.getByRole('button', { name: 'Show more results' }).click();
    await page_.getByText('22 shown').waitFor();
    const titles = await results.getByRole('link').allTextContents();
    expect(new Set(titles).size).toBe(22);
    expect(titles.every((title) => title.startsWith('Standup'))).toBe(true);
    expect(await page_.getByRole('button', { name: 'Show more results' }).count()).toBe(0);

    await page_.getByRole('button', { name: 'Run the doctor' }).click();
    await page_.locator('.doctor td.mono').first().waitFor();
    await expectNoAxeViolations(page_, 'the docs page with search and doctor');
    expect(session.foreign).toEqual([]);
    // Chromium reports the hostile body's inline handler as DOMPurify
    // parses it in its inert document (the CSP blocks it there, and nothing
    // of it reaches the page: checked above); nothing else may show.
    const blockedHandlers = session.problems.filter((problem) => problem.startsWith('csp: Executing inline event handler'));
    expect(session.problems.filter((problem) => !blockedHandlers.includes(problem))).toEqual([]);
  });

  test('members see the documents and runs, without the admin buttons', async () => {
    await gql(server, 'mutation($input: CreateUserInput!) { createUser(input: $input) { id } }', { input: { username: 'bob', password: 'bob-password-long-enough', role: 'MEMBER' } }, await cookieOf(session.context));
    const member = await openSession(browser, server);
    await signIn(member.page, { username: 'bob', password: 'bob-password-long-enough' });
    await member.page.goto('/docs');
    await member.page.getByRole('link', { name: 'Handbook' }).waitFor();
    await member.page.locator('.run-status').first().waitFor();
    expect(await member.page.getByRole('button', { name: 'Sync now' }).count()).toBe(0);
    expect(await member.page.getByRole('button', { name: 'Run the doctor' }).count()).toBe(0);
    await expectNoAxeViolations(member.page, 'the docs page, member');
    await member.context.close();
  });

  test('phone: the page fits and passes axe', async () => {
    const phone = await openSession(browser, server, { width: 390, height: 844 });
    await phone.context.addCookies(await session.context.cookies());
    await phone.page.goto('/docs');
    await phone.page.getByRole('link', { name: 'Handbook' }).waitFor();
    await phone.page.locator('.run-status').first().waitFor();
    const overflow = await phone.page.evaluate(() => document.querySelector('.page')!.scrollWidth - document.querySelector('.page')!.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await expectNoAxeViolations(phone.page, 'the docs page, phone');
    await screenshot(phone.page, 'docs-phone-light');
    await phone.context.close();
  });

  test('dark theme passes axe too', async () => {
    const dark = await openSession(browser, server, { colorScheme: 'dark' });
    await dark.context.addCookies(await session.context.cookies());
    await dark.page.goto('/docs');
    await dark.page.getByRole('heading', { level: 2, name: 'Sync runs' }).waitFor();
    await dark.page.locator('.run-status').first().waitFor();
    await expectNoAxeViolations(dark.page, 'the docs page, dark');
    await screenshot(dark.page, 'docs-desktop-dark');
    await dark.context.close();
  });
});
