// What every browser test needs: the real `trellis` binary on a fresh
// SQLite database (port 0), a loopback feed publisher, and Debian's Chromium
// driven by playwright-core (never a downloaded browser).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import AxeBuilder from '@axe-core/playwright';
import { expect } from 'vitest';

const FRONTEND = resolve(import.meta.dirname, '..');
const ROOT = resolve(FRONTEND, '..');

export const ADMIN = { username: 'admin', password: 'correct horse battery staple' };

export interface TrellisServer {
  url: string;
  process: ChildProcess;
  dataDir: string;
  stop(): Promise<void>;
}

/** Starts `trellis serve` (TRELLIS_BIN, default target/debug/trellis) and waits for `listening`. */
export async function startServer(env: Record<string, string> = {}): Promise<TrellisServer> {
  const bin = resolve(process.env.TRELLIS_BIN ?? join(ROOT, 'target/debug/trellis'));
  const dataDir = await mkdtemp(join(tmpdir(), 'trellis-e2e-'));
  await mkdir(dataDir, { recursive: true });
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('TRELLIS_') && key !== 'DATABASE_URL' && key !== 'REDIS_URL'),
  );
  const child = spawn(bin, ['serve'], {
    cwd: dataDir,
    env: {
      ...clean,
      TRELLIS_LISTEN: '127.0.0.1:0',
      TRELLIS_DATA_DIR: dataDir,
      DATABASE_URL: `sqlite://${join(dataDir, 'trellis.db')}?mode=rwc`,
      TRELLIS_ADMIN_USER: ADMIN.username,
      TRELLIS_ADMIN_PASSWORD: ADMIN.password,
      TRELLIS_JWT_SECRET: 'e2e-secret-e2e-secret-e2e-secret-e2e-secret',
      TRELLIS_ALLOW_PRIVATE_FEEDS: 'true',
      TRELLIS_WEB_DIR: join(FRONTEND, 'dist'),
      TRELLIS_NODE_CONFIG: join(ROOT, 'config/nodes.toml'),
      TRELLIS_LOG_FORMAT: 'json',
      TRELLIS_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines = createInterface({ input: child.stderr! });
  const seen: string[] = [];
  const url = await new Promise<string>((resolveUrl, reject) => {
    const onLine = (line: string) => {
      if (process.env.TEST_LOG) console.error(line);
      try {
        const event = JSON.parse(line) as { message?: string; addr?: string; fields?: { message?: string; addr?: string } };
        const message = event.fields?.message ?? event.message;
        const addr = event.fields?.addr ?? event.addr;
        if (message === 'listening' && addr) {
          resolveUrl(`http://${addr}`);
          return;
        }
      } catch {
        // Not JSON: keep it for the error message.
      }
      seen.push(line);
    };
    lines.on('line', onLine);
    child.once('exit', (code) => reject(new Error(`trellis exited (${code}) before listening:\n${seen.join('\n')}`)));
    child.once('error', reject);
  });
  return {
    url,
    process: child,
    dataDir,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Listens on a free loopback port; the server's base URL. */
export async function listenLoopback(server: Server): Promise<string> {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return `http://127.0.0.1:${address.port}`;
}

/** Stops a loopback server, dropping its open connections. */
export async function closeLoopback(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
}

/** A request's body, as text. */
export async function bodyOf(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Answers JSON with `status`. */
export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(body));
}

export interface FeedEntry {
  guid: string;
  title: string;
  body: string;
  date: Date;
}

/** A loopback publisher: an HTML page linking its Atom feed, and the feed, whose entries tests add. */
export class FeedServer {
  readonly entries: FeedEntry[] = [];
  private server: Server;
  url = '';
  /** Requests for the feed, for tests that wait for a pull. */
  feedRequests = 0;

  constructor(readonly title = 'Loopback Gazette') {
    this.server = createServer((request, response) => this.handle(request, response));
  }

  async start(): Promise<this> {
    this.url = await listenLoopback(this.server);
    return this;
  }

  add(count: number, prefix = 'Story'): FeedEntry[] {
    const added: FeedEntry[] = [];
    for (let index = 0; index < count; index += 1) {
      const n = this.entries.length + 1;
      const entry = {
        guid: `urn:e2e:${n}`,
        title: `${prefix} ${n}`,
        body: `<p>Body of ${prefix.toLowerCase()} ${n}. <a href="/elsewhere">A relative link</a>.</p><script>window.__pwned = true</script>`,
        date: new Date(Date.UTC(2026, 0, 1, 0, n)),
      };
      this.entries.push(entry);
      added.push(entry);
    }
    return added;
  }

  private handle(request: IncomingMessage, response: ServerResponse) {
    if (request.url === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(
        `<!doctype html><html><head><title>${this.title}</title>` +
          `<link rel="alternate" type="application/atom+xml" title="${this.title}" href="/feed.xml"></head>` +
          `<body><h1>${this.title}</h1></body></html>`,
      );
      return;
    }
    if (request.url === '/feed.xml') {
      this.feedRequests += 1;
      const entries = [...this.entries]
        .reverse()
        .map(
          (entry) =>
            `<entry><id>${entry.guid}</id><title>${entry.title}</title>` +
            `<link href="${this.url}/posts/${encodeURIComponent(entry.guid)}"/>` +
            `<updated>${entry.date.toISOString()}</updated>` +
            `<content type="html">${escapeXml(entry.body)}</content></entry>`,
        )
        .join('');
      response.writeHead(200, { 'content-type': 'application/atom+xml; charset=utf-8' });
      response.end(
        `<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">` +
          `<title>${this.title}</title><id>urn:e2e:feed</id><updated>2026-01-01T00:00:00Z</updated>` +
          `<link href="${this.url}/"/>${entries}</feed>`,
      );
      return;
    }
    response.writeHead(404).end();
  }

  async stop(): Promise<void> {
    await closeLoopback(this.server);
  }
}

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

export const CHROMIUM_ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
];

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROME_PATH ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
    headless: true,
  });
}

export interface Session {
  context: BrowserContext;
  page: Page;
  /** Requests the page sent anywhere but the server. */
  foreign: string[];
  /** CSP violations and uncaught errors the page reported. */
  problems: string[];
}

/**
 * A fresh browser context whose requests to anything but `server` (and the
 * `allow`ed fakes) are blocked and recorded.
 */
export async function openSession(
  browser: Browser,
  server: TrellisServer,
  options: {
    width?: number;
    height?: number;
    colorScheme?: 'light' | 'dark';
    serviceWorkers?: 'allow' | 'block';
    /** Loopback fakes the browser is sent to (an identity provider's or AniList's page). */
    allow?: string[];
  } = {},
): Promise<Session> {
  const context = await browser.newContext({
    baseURL: server.url,
    viewport: { width: options.width ?? 1280, height: options.height ?? 800 },
    colorScheme: options.colorScheme ?? 'light',
    serviceWorkers: options.serviceWorkers ?? 'block',
    reducedMotion: 'reduce',
  });
  const foreign: string[] = [];
  const problems: string[] = [];
  const origins = new Set([server.url, ...(options.allow ?? [])].map((url) => new URL(url).origin));
  await context.route(
    (url) => !origins.has(url.origin),
    async (route) => {
      foreign.push(route.request().url());
      await route.abort('blockedbyclient');
    },
  );
  const page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|Refused to/.test(message.text())) {
      problems.push(`csp: ${message.text()}`);
    }
  });
  return { context, page, foreign, problems };
}

export async function signIn(page: Page, who = ADMIN): Promise<void> {
  await page.goto('/login');
  await page.getByLabel('Username').fill(who.username);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname.startsWith('/read'));
}

/** Runs axe on the page as it is; any violation fails the test with its rules and targets. */
export async function expectNoAxeViolations(page: Page, what: string): Promise<void> {
  // Measure the page at rest: a view sliding or fading in (the phone's
  // full-screen article) has colours in between, which axe would judge.
  // A spinner runs forever: only animations that end are waited for.
  await page.evaluate(() =>
    Promise.all(
      document
        .getAnimations()
        .filter((animation) => animation.effect?.getComputedTiming().iterations !== Infinity)
        .map((animation) => animation.finished.catch(() => undefined)),
    ),
  );
  const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']).analyze();
  const summary = results.violations.map(
    (violation) =>
      `${violation.id} (${violation.impact}): ${violation.nodes
        .map((node) => `${node.target.join(' ')} — ${node.failureSummary ?? ''}`)
        .join(', ')}`,
  );
  expect(summary, `axe violations on ${what}`).toEqual([]);
}

export const RESULTS = join(FRONTEND, 'test-results');

/** Saves a screenshot as a test artifact (frontend/test-results/, git-ignored). */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(RESULTS, { recursive: true });
  await page.screenshot({ path: join(RESULTS, `${name}.png`) });
}

/** A GraphQL call from the test itself (signed in by cookie when `page` is given). */
export async function gql<T = any>(server: TrellisServer, query: string, variables: object = {}, cookie?: string): Promise<T> {
  const response = await fetch(`${server.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: T; errors?: { message: string }[] };
  if (body.errors?.length) throw new Error(body.errors.map((error) => error.message).join('; '));
  return body.data as T;
}

/** The session cookie of a browser context, for `gql`. */
export async function cookieOf(context: BrowserContext): Promise<string> {
  const cookies = await context.cookies();
  return cookies.map((cookie) => `${cookie.name}=${cookie.value}`).join('; ');
}
