// The app and the playground as a browser gets them: client routes load the
// app, nothing leaves for another origin, the CSP holds, and GraphiQL runs a
// query and a subscription from our own assets.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser } from 'playwright-core';
import routes from '../src/routes.json';
import { ADMIN, expectNoAxeViolations, gql, launchBrowser, openSession, screenshot, signIn, startServer, type TrellisServer } from './harness';

let server: TrellisServer;
let browser: Browser;

beforeAll(async () => {
  [server, browser] = await Promise.all([startServer(), launchBrowser()]);
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('serving', () => {
  test('every client route loads the app, with a strict CSP and no foreign request', async () => {
    const session = await openSession(browser, server);
    for (const route of routes.routes) {
      const response = await session.page.goto(route.example);
      expect(response?.status(), route.example).toBe(200);
      const csp = response?.headers()['content-security-policy'] ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      // Anonymous: every page leads to the login form.
      await session.page.getByRole('button', { name: 'Sign in' }).waitFor();
    }
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
    await session.context.close();
  });

  test('a missing asset is a 404, not the app', async () => {
    const response = await fetch(`${server.url}/assets/index-missing.js`, { headers: { accept: 'text/html' } });
    expect(response.status).toBe(404);
    expect(await response.text()).not.toContain('<div id="app">');
  });
});

describe('login', () => {
  test('a wrong password is named, the right one signs in, logout signs out', async () => {
    const session = await openSession(browser, server);
    const { page } = session;
    await page.goto('/settings');
    await page.waitForURL(/\/login\?next=%2Fsettings/);
    await expectNoAxeViolations(page, 'the login page');
    await screenshot(page, 'login-desktop-light');
    await page.getByLabel('Username').fill(ADMIN.username);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Wrong username or password');
    await page.getByLabel('Password').fill(ADMIN.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Back where the visitor wanted to go.
    await page.waitForURL((url) => url.pathname === '/settings');
    await page.getByRole('button', { name: /Sign out admin/ }).click();
    await page.waitForURL((url) => url.pathname === '/login');
    await page.goto('/read');
    await page.waitForURL(/\/login/);
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
    await session.context.close();
  });

  test('too many attempts show how long to wait', async () => {
    // A server of its own: the limiter also counts by address, and every test comes from 127.0.0.1.
    const limited = await startServer();
    const session = await openSession(browser, limited);
    const { page } = session;
    await page.goto('/login');
    const who = 'nobody-here';
    // The limiter's default: 10 failed attempts per 60 s.
    for (let attempt = 0; attempt < 11; attempt += 1) {
      await gql(limited, 'mutation($u:String!){ login(username:$u, password:"x"){ accessToken } }', { u: who }).catch(() => undefined);
    }
    await page.getByLabel('Username').fill(who);
    await page.getByLabel('Password').fill('still wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/Too many attempts\. Try again in \d+ (seconds?|minutes?)/);
    await session.context.close();
    await limited.stop();
  });
});

describe('GraphiQL', () => {
  test('runs a query and a subscription with every other origin blocked', async () => {
    const session = await openSession(browser, server);
    const { page, context } = session;
    await signIn(page);
    await page.goto('/graphql');
    await page.locator('.graphiql-editor .CodeMirror').first().waitFor();
    // The schema (introspection) has loaded once the docs explorer can open.
    await page.getByRole('button', { name: 'Show Documentation Explorer' }).waitFor();
    // Typed as a person would, so GraphiQL sees the edit (and the operation's name).
    const setQuery = async (text: string) => {
      await page.locator('.graphiql-editor .CodeMirror').first().click();
      await page.keyboard.press('Control+A');
      await page.keyboard.press('Delete');
      await page.keyboard.insertText(text);
    };
    const result = () => page.locator('.result-window .CodeMirror').evaluate((node) => (node as unknown as { CodeMirror: { getValue(): string } }).CodeMirror.getValue());

    await setQuery('query { me { username role } }');
    await page.getByRole('button', { name: /Execute query/ }).click();
    await expect.poll(result).toContain('"username": "admin"');

    await setQuery('subscription Events { events(topics: ["task.updated"]) { topic payload } }');
    // GraphiQL reads the operation's name from the edited text shortly after
    // typing; until then it may answer from the old one: start again then.
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const execute = page.getByRole('button', { name: /Execute query/ });
    await expect
      .poll(
        async () => {
          const text = await result();
          if (text.includes('"topic": "task.updated"')) return text;
          if (await execute.isVisible()) await execute.click();
          // Each probe task's events reach a running subscription.
          await gql(server, 'mutation { probeTask(input: { stages: 1 }) { id } }', {}, cookie);
          return result();
        },
        { timeout: 20_000 },
      )
      .toContain('"topic": "task.updated"');
    await screenshot(page, 'graphiql-desktop-light');
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
    await context.close();
  });
});
