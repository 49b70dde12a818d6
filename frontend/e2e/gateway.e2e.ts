// The gateway page against the real server, a loopback fake Kavita with a
// library and a fake AniList (its OAuth pages and GraphQL API): the
// manifest shows, a wrong API key is refused on the page, the right one
// links, an event is delivered to the fake and shows confirmed live, AniList
// links through its OAuth round trip in the browser, and "Sync now" carries
// the Kavita reading to AniList — live, with a proposed title link to
// confirm, and exactly one list write per change. axe on the page, light
// and dark.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { cookieOf, expectNoAxeViolations, gql, launchBrowser, openSession, screenshot, signIn, startServer, type Session, type TrellisServer } from './harness';
import { ANILIST_CLIENT, FakeAniList, FakeKavita, KAVITA_KEY, chapters } from './gatewayFakes';

const RIGHT_KEY = KAVITA_KEY;
const WRONG_KEY = 'not-a-kavita-key';

let kavita: FakeKavita;
let anilist: FakeAniList;
let server: TrellisServer;
let browser: Browser;
let session: Session;
let page: Page;
let cookie: string;

beforeAll(async () => {
  [kavita, anilist, browser] = await Promise.all([new FakeKavita().start(), new FakeAniList().start(), launchBrowser()]);
  kavita.library.push(
    // Linked by its web link; two chapters read, rated 4.5.
    {
      id: 11,
      name: 'One Piece',
      userRating: 4.5,
      webLinks: 'https://www.mangaupdates.com/series/pb8uwds,https://anilist.co/manga/30013/One-Piece',
      volumes: [{ id: 1, minNumber: 1, chapters: chapters(1, 3, 2) }],
    },
    // No AniList web link: a title search proposes one; three chapters read.
    { id: 12, name: 'Yotsuba&!', userRating: 0, webLinks: 'https://www.mangaupdates.com/series/yotsuba', volumes: [{ id: 2, minNumber: 1, chapters: chapters(2, 5, 3) }] },
    // Nothing read, rated or wanted: not scrobbled at all.
    { id: 13, name: 'Unopened Tales', userRating: 0, webLinks: '', volumes: [{ id: 3, minNumber: 1, chapters: chapters(3, 4, 0) }] },
  );
  server = await startServer({
    TRELLIS_KAVITA_URL: kavita.url,
    TRELLIS_ANILIST_API_URL: `${anilist.url}/graphql`,
    TRELLIS_ANILIST_OAUTH_URL: anilist.url,
    TRELLIS_ANILIST_CLIENT_ID: ANILIST_CLIENT.id,
    TRELLIS_ANILIST_CLIENT_SECRET: ANILIST_CLIENT.secret,
    TRELLIS_ANILIST_REQUESTS_PER_MINUTE: '600',
    TRELLIS_GATEWAY_SCROBBLE_INTERVAL: '0',
  });
  // The browser may visit AniList's (fake) consent page, nothing else.
  session = await openSession(browser, server, { allow: [anilist.url] });
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

  test('AniList links through its OAuth round trip in the browser', async () => {
    await page.goto('/gateway');
    const start = page.getByRole('button', { name: 'Link AniList' });
    await start.waitFor();
    await start.click();
    // The fake's consent page sends the browser straight back with a code;
    // the server trades it and lands on the settings page.
    await page.waitForURL((url) => url.pathname === '/settings' && url.searchParams.get('linked') === 'anilist');
    const authorize = anilist.authorizations.at(-1)!;
    expect(authorize.get('client_id')).toBe(ANILIST_CLIENT.id);
    expect(authorize.get('state')).toMatch(/\S{20,}/);
    expect(authorize.get('redirect_uri')).toBe(`${server.url}/gateway/oauth/anilist/callback`);
    await page.getByRole('status').filter({ hasText: 'AniList is linked to your account.' }).waitFor();
    await page.getByRole('link', { name: 'Open the gateway page' }).click();
    const card = page.locator('section[data-provider="anilist"]');
    await card.locator('.status', { hasText: 'Linked' }).waitFor();
    await card.getByText(`${anilist.viewer.name} (id ${anilist.viewer.id})`).waitFor();
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
  });

  test('sync now carries the Kavita reading to AniList, live, and proposes a title link to confirm', async () => {
    const sync = page.getByRole('button', { name: 'Sync now' });
    await sync.click();
    // Live: the task's end and what it did show without a reload. The
    // unread series is not counted.
    await page
      .getByRole('status')
      .filter({ hasText: 'Sync finished: 2 series read on Kavita, 2 changes sent to AniList, 1 title link to confirm below.' })
      .waitFor({ timeout: 30_000 });
    // The series with an AniList web link is linked and scrobbled: its
    // progress and rating are delivered and confirmed by a read-back.
    const events = page.locator('table.events tbody tr');
    const progress = events.filter({ hasText: 'Read up to chapter 2' });
    const rating = events.filter({ hasText: 'Rated 4.5 of 5' });
    await expect.poll(() => progress.getAttribute('data-status'), { timeout: 30_000 }).toBe('CONFIRMED');
    await expect.poll(() => rating.getAttribute('data-status'), { timeout: 30_000 }).toBe('CONFIRMED');
    expect(await progress.textContent()).toContain('title 30013');
    // The series without one waits for the user, with what a search found.
    const proposed = page.locator('table.title-links tr[data-series="12"]');
    await expect.poll(() => proposed.getAttribute('data-state')).toBe('PROPOSED');
    expect(await proposed.textContent()).toContain('Yotsuba&!');
    expect(await proposed.textContent()).toContain('AniList 104463');
    // The unread series was not linked at all; nothing was sent for the proposed one.
    expect(await page.locator('table.title-links tr[data-series="13"]').count()).toBe(0);
    expect(anilist.saves.map((save) => save.mediaId)).not.toContain(104463);
    await expectNoAxeViolations(page, 'the gateway page after a sync');
    await screenshot(page, 'gateway-synced-light');

    await proposed.getByRole('button', { name: 'Confirm Yotsuba&! for Yotsuba&!' }).click();
    await page.getByRole('status').filter({ hasText: 'Yotsuba&! is linked to Yotsuba&!' }).waitFor();
    await page.getByText('Nothing waits for you.').waitFor();

    // The next sync scrobbles the confirmed series too, and nothing twice.
    await sync.click();
    await page.getByRole('status').filter({ hasText: 'Sync finished: 2 series read on Kavita, 1 change sent to AniList.' }).waitFor({ timeout: 30_000 });
    const third = events.filter({ hasText: 'Read up to chapter 3' });
    await expect.poll(() => third.getAttribute('data-status'), { timeout: 30_000 }).toBe('CONFIRMED');
    expect(await third.textContent()).toContain('title 104463');
    // Exactly one list write per change, each as the read-back confirmed it.
    expect([...anilist.saves].sort((a, b) => a.mediaId - b.mediaId || (a.progress ?? -1) - (b.progress ?? -1))).toEqual([
      { mediaId: 30013, score: 9 },
      { mediaId: 30013, progress: 2 },
      { mediaId: 104463, progress: 3 },
    ]);
    expect(anilist.entries.get(30013)).toMatchObject({ progress: 2, score: 9 });
    // Confirmed events are receipts.
    await page.reload();
    const receipts = page.locator('table.receipts');
    await receipts.locator('tbody tr').first().waitFor();
    await expect.poll(() => receipts.textContent()).toContain('title 104463');
    expect(await receipts.textContent()).toContain('title 30013');
    await expectNoAxeViolations(page, 'the gateway page with scrobbled receipts');
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
  });
});
