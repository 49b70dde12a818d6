// The gateway page against the real server and a loopback fake Kavita
// (and a fake AniList authorize page): the manifest shows, a wrong API key
// is refused on the page, the right one links, an event is delivered to
// the fake and shows confirmed live, the AniList link starts its OAuth
// round trip. axe on the page, light and dark.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { cookieOf, expectNoAxeViolations, gql, launchBrowser, openSession, screenshot, signIn, startServer, type Session, type TrellisServer } from './harness';

const RIGHT_KEY = 'kavita-key-of-alice-0123456789';
const WRONG_KEY = 'not-a-kavita-key';

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}

/**
 * Kavita as the gateway uses it: `POST /api/Plugin/authenticate` trades an
 * API key for a JWT; Want to Read reads and writes need that JWT as a
 * bearer token (401 without it).
 */
class FakeKavita {
  private server: Server = createServer((request, response) => this.handle(request, response));
  url = '';
  readonly tokens = new Map<string, string>();
  readonly wantToRead = new Set<number>();
  /** Every request, as `METHOD path?query` (keys included: the fake is ours). */
  readonly requests: string[] = [];

  async start(): Promise<this> {
    await new Promise<void>((done) => this.server.listen(0, '127.0.0.1', done));
    const address = this.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    this.url = `http://127.0.0.1:${address.port}`;
    return this;
  }

  private json(response: ServerResponse, status: number, body: unknown) {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    response.end(JSON.stringify(body));
  }

  private async handle(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url);
    this.requests.push(`${request.method} ${url.pathname}${url.search}`);
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');

    if (request.method === 'POST' && url.pathname === '/api/Plugin/authenticate') {
      if (url.searchParams.get('apiKey') !== RIGHT_KEY || !url.searchParams.get('pluginName')) {
        response.writeHead(401).end();
        return;
      }
      const exp = Math.floor(Date.now() / 1000) + 10 * 24 * 3600;
      const token = `${base64url('{"alg":"HS512","typ":"JWT"}')}.${base64url(JSON.stringify({ nameid: 'alice', exp }))}.${base64url(`sig-${this.tokens.size}`)}`;
      this.tokens.set(token, 'alice');
      this.json(response, 200, { username: 'alice', token });
      return;
    }

    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!bearer || !this.tokens.has(bearer)) {
      response.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
      return;
    }
    if (request.method === 'GET' && url.pathname === '/api/want-to-read') {
      this.json(response, 200, this.wantToRead.has(Number(url.searchParams.get('seriesId'))));
      return;
    }
    if (request.method === 'POST' && url.pathname === '/api/want-to-read/add-series') {
      const { seriesIds } = JSON.parse(body || '{}') as { seriesIds?: number[] };
      for (const id of seriesIds ?? []) this.wantToRead.add(id);
      this.json(response, 200, true);
      return;
    }
    response.writeHead(404).end();
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((done) => this.server.close(done));
  }
}

/** Stands where AniList is configured; the browser never gets to it (other origins are blocked). */
async function quietServer(): Promise<{ url: string; requests: string[]; stop(): Promise<void> }> {
  const requests: string[] = [];
  const server = createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    response.writeHead(404).end();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}

let kavita: FakeKavita;
let anilist: Awaited<ReturnType<typeof quietServer>>;
let server: TrellisServer;
let browser: Browser;
let session: Session;
let page: Page;
let cookie: string;

beforeAll(async () => {
  [kavita, anilist, browser] = await Promise.all([new FakeKavita().start(), quietServer(), launchBrowser()]);
  server = await startServer({
    TRELLIS_KAVITA_URL: kavita.url,
    TRELLIS_ANILIST_API_URL: anilist.url,
    TRELLIS_ANILIST_OAUTH_URL: anilist.url,
    TRELLIS_ANILIST_CLIENT_ID: 'e2e-client',
    TRELLIS_ANILIST_CLIENT_SECRET: 'e2e-client-secret',
    TRELLIS_GATEWAY_SCROBBLE_INTERVAL: '0',
  });
  session = await openSession(browser, server);
  page = session.page;
  await signIn(page);
  cookie = await cookieOf(session.context);
});

afterAll(async () => {
  await session?.context.close();
  await browser?.close();
  await server?.stop();
  await kavita?.stop();
  await anilist?.stop();
});

const kavitaCard = () => page.locator('section[data-provider="kavita"]');

describe('gateway page', () => {
  test('shows the capability manifest per provider, with limitations', async () => {
    await page.goto('/gateway');
    await page.getByRole('heading', { level: 2, name: 'Kavita', exact: true }).waitFor();
    await page.getByRole('heading', { level: 2, name: 'AniList', exact: true }).waitFor();
    const card = kavitaCard();
    await card.getByText('Not linked').waitFor();
    // Features by name, with what each cannot do.
    await card.getByRole('rowheader', { name: 'Reading progress' }).waitFor();
    await expect.poll(() => card.locator('tr[data-feature="REMOVAL"]').textContent()).toContain('Kavita cannot delete a rating');
    await expect.poll(() => card.locator('tr[data-feature="SCROBBLE_FROM_KAVITA"]').textContent()).toContain('No');
    // Empty states below.
    await page.getByRole('heading', { name: 'No events yet' }).waitFor();
    await page.getByRole('heading', { name: 'No receipts yet' }).waitFor();
    await page.getByRole('heading', { name: 'No title links yet' }).waitFor();
    await expectNoAxeViolations(page, 'the gateway page, nothing linked');
    await screenshot(page, 'gateway-desktop-light');
  });

  test('a wrong Kavita key is refused on the page; the right one links, and is never shown', async () => {
    const input = page.getByLabel('Kavita API key');
    expect(await input.getAttribute('type')).toBe('password');
    await input.fill(WRONG_KEY);
    await page.getByRole('button', { name: 'Link Kavita', exact: true }).click();
    await kavitaCard().getByRole('alert').waitFor();
    expect(await kavitaCard().getByRole('alert').textContent()).toMatch(/\S/);
    expect(kavita.requests.some((line) => line.startsWith('POST /api/Plugin/authenticate') && line.includes(WRONG_KEY))).toBe(true);
    await kavitaCard().getByText('Not linked').waitFor();

    await input.fill(RIGHT_KEY);
    await page.getByRole('button', { name: 'Link Kavita', exact: true }).click();
    await kavitaCard().getByRole('status').filter({ hasText: 'Kavita is linked: signed in as alice' }).waitFor();
    await kavitaCard().locator('.status', { hasText: 'Linked' }).waitFor();
    await kavitaCard().getByText('alice').first().waitFor();
    // The key is not on the page, in a field or anywhere else.
    expect(await page.getByLabel('Kavita API key').count()).toBe(0);
    expect(await page.content()).not.toContain(RIGHT_KEY);
    const links = await gql<{ providerLinks: { provider: string; accountName: string }[] }>(server, '{ providerLinks { provider accountName } }', {}, cookie);
    expect(links.providerLinks).toEqual([{ provider: 'KAVITA', accountName: 'alice' }]);
    // A check probes the linked key at the fake again.
    const before = kavita.requests.length;
    await page.getByRole('button', { name: 'Check Kavita now' }).click();
    await kavitaCard().getByText('Your account: works').waitFor();
    expect(kavita.requests.length).toBeGreaterThan(before);
    await expectNoAxeViolations(page, 'the gateway page, Kavita linked');
  });

  test('an event reaches the fake Kavita and shows confirmed live, then as a receipt', async () => {
    const admitted = await gql<{ addToWantToRead: { id: string } }>(
      server,
      'mutation { addToWantToRead(provider: KAVITA, titleId: "7") { id status } }',
      {},
      cookie,
    );
    const row = page.locator(`tr[data-event="${admitted.addToWantToRead.id}"]`);
    // Live: no reload; the row turns confirmed once the read-back shows it.
    await row.waitFor();
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 30_000 }).toBe('CONFIRMED');
    expect(await row.textContent()).toContain('Added to want to read');
    expect(kavita.wantToRead.has(7)).toBe(true);
    await page.reload();
    await page.locator('table.receipts tbody tr').first().waitFor();
    expect(await page.locator('table.receipts').textContent()).toContain('title 7');
    // Filter: nothing waits for review.
    await page.getByLabel('Status', { exact: true }).selectOption('REVIEW');
    await page.getByRole('heading', { name: 'No events: needs review' }).waitFor();
    await page.getByLabel('Status', { exact: true }).selectOption('');
    await page.locator(`tr[data-event="${admitted.addToWantToRead.id}"]`).waitFor();
    await expectNoAxeViolations(page, 'the gateway page with events');
  });

  test('an event waiting for the user can be dismissed from the page', async () => {
    // AniList is not linked: the event waits for the user.
    const admitted = await gql<{ addToWantToRead: { id: string } }>(
      server,
      'mutation { addToWantToRead(provider: ANILIST, titleId: "30013") { id } }',
      {},
      cookie,
    );
    const row = page.locator(`tr[data-event="${admitted.addToWantToRead.id}"]`);
    await row.waitFor();
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 30_000 }).toBe('WAITING');
    await row.getByText('Waiting for you').waitFor();
    await expectNoAxeViolations(page, 'the gateway page with an event waiting');
    await row.scrollIntoViewIfNeeded();
    await screenshot(page, 'gateway-events-light');
    const dismiss = row.getByRole('button', { name: 'Dismiss: AniList title 30013' });
    // Keyboard: focus the button and press Enter.
    await dismiss.focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => row.getAttribute('data-status')).toBe('DISMISSED');
    expect(await row.getByRole('button').count()).toBe(0);
    const stored = await gql<{ gatewayEvent: { status: string } }>(server, 'query($id: ID!) { gatewayEvent(id: $id) { status } }', { id: admitted.addToWantToRead.id }, cookie);
    expect(stored.gatewayEvent.status).toBe('DISMISSED');
  });

  test('dark theme passes axe too', async () => {
    const dark = await openSession(browser, server, { colorScheme: 'dark' });
    await dark.context.addCookies(await session.context.cookies());
    await dark.page.goto('/gateway');
    await dark.page.getByRole('heading', { level: 2, name: 'Kavita', exact: true }).waitFor();
    await dark.page.locator('table.receipts').waitFor();
    await expectNoAxeViolations(dark.page, 'the gateway page, dark');
    await screenshot(dark.page, 'gateway-desktop-dark');
    expect(dark.foreign).toEqual([]);
    expect(dark.problems).toEqual([]);
    await dark.context.close();
  });

  test('phone: the page fits, passes axe, and its tables scroll inside their cards', async () => {
    const phone = await openSession(browser, server, { width: 390, height: 844 });
    await phone.context.addCookies(await session.context.cookies());
    await phone.page.goto('/gateway');
    await phone.page.getByRole('heading', { level: 2, name: 'Kavita', exact: true }).waitFor();
    await phone.page.locator('table.events').waitFor();
    // Nothing wider than the screen: wide tables scroll in their own box.
    const overflow = await phone.page.evaluate(() => document.querySelector('.page')!.scrollWidth - document.querySelector('.page')!.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await expectNoAxeViolations(phone.page, 'the gateway page, phone');
    await screenshot(phone.page, 'gateway-phone-light');
    await phone.context.close();
  });

  test('linking AniList sends the browser to its authorize page', async () => {
    await page.goto('/gateway');
    const start = page.getByRole('button', { name: 'Link AniList' });
    await start.waitFor();
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
    const leaving = page.waitForRequest((request) => request.url().startsWith(anilist.url));
    await start.click();
    const authorize = new URL((await leaving).url());
    expect(authorize.pathname).toContain('/oauth/authorize');
    expect(authorize.searchParams.get('client_id')).toBe('e2e-client');
    expect(authorize.searchParams.get('state')).toMatch(/\S{20,}/);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${server.url}/gateway/oauth/anilist/callback`);
  });
});
