// Single sign-on in the browser, against the real server and a loopback
// OpenID Provider: the login page shows the provider's button, a click goes
// through the provider and lands signed in (on the reader, or on the page
// the login started from), and a declined authorization ends on a page that
// says so. axe on the login page with the button.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser } from 'playwright-core';
import {
  bodyOf,
  closeLoopback,
  cookieOf,
  expectNoAxeViolations,
  gql,
  launchBrowser,
  listenLoopback,
  openSession,
  screenshot,
  sendJson,
  startServer,
  type Session,
  type TrellisServer,
} from './harness';

const CLIENT_ID = 'trellis-e2e';
const CLIENT_SECRET = 'trellis-e2e-client-secret';
const DISPLAY_NAME = 'Loopback ID';

/** Someone who signs in at the fake. */
interface Person {
  sub: string;
  username: string;
}

interface Grant {
  person: Person;
  clientId: string;
  nonce: string;
  redirectUri: string;
  challenge: string;
}

function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/**
 * An OpenID Provider written from OpenID Connect Core and Discovery, with
 * `node:http` and `node:crypto` only:
 *
 * - `GET /.well-known/openid-configuration`: the discovery document;
 * - `GET /jwks`: the RSA key made at start, as a JWK with its `kid`;
 * - `GET /authorize`: an auto-consenting user: 302 back to `redirect_uri`
 *   with a `code` and the same `state` — or `error=access_denied` once
 *   `decline()` was called;
 * - `POST /token`: trades a code once, checking the client (HTTP Basic or
 *   form), the `redirect_uri` and the PKCE S256 verifier, for an RS256
 *   id_token carrying the authorize request's `nonce`.
 */
class FakeIdp {
  private server = createServer((request, response) => void this.handle(request, response));
  private readonly kid = `e2e-${randomBytes(4).toString('hex')}`;
  private readonly key: KeyObject;
  private readonly grants = new Map<string, Grant>();
  private person: Person | null = null;
  url = '';
  /** Every `/authorize` query, as the browser sent it. */
  readonly authorizations: URLSearchParams[] = [];
  /** Each `/token` call's outcome: `ok`, or the OAuth error answered. */
  readonly tokenCalls: string[] = [];

  constructor() {
    this.key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  }

  async start(): Promise<this> {
    this.url = await listenLoopback(this.server);
    return this;
  }

  /** The next authorizations sign `person` in. */
  consent(person: Person): void {
    this.person = person;
  }

  /** The next authorizations are declined (`error=access_denied`). */
  decline(): void {
    this.person = null;
  }

  private idToken(grant: Grant): string {
    const now = Math.floor(Date.now() / 1000);
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: this.kid }));
    const claims = base64url(
      JSON.stringify({
        iss: this.url,
        aud: grant.clientId,
        sub: grant.person.sub,
        iat: now,
        exp: now + 300,
        nonce: grant.nonce,
        email: `${grant.person.username}@idp.test`,
        preferred_username: grant.person.username,
      }),
    );
    const signature = sign('sha256', Buffer.from(`${header}.${claims}`), this.key);
    return `${header}.${claims}.${base64url(signature)}`;
  }

  private async handle(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url);
    if (request.method === 'GET' && url.pathname === '/.well-known/openid-configuration') {
      sendJson(response, 200, {
        issuer: this.url,
        authorization_endpoint: `${this.url}/authorize`,
        token_endpoint: `${this.url}/token`,
        jwks_uri: `${this.url}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      });
      return;
    }
    if (request.method === 'GET' && url.pathname === '/jwks') {
      const jwk = createPublicKey(this.key).export({ format: 'jwk' });
      sendJson(response, 200, { keys: [{ ...jwk, kid: this.kid, use: 'sig', alg: 'RS256' }] });
      return;
    }
    if (request.method === 'GET' && url.pathname === '/authorize') {
      const query = url.searchParams;
      this.authorizations.push(query);
      const back = new URL(query.get('redirect_uri') ?? '');
      if (this.person) {
        const code = `code-${randomBytes(12).toString('hex')}`;
        this.grants.set(code, {
          person: this.person,
          clientId: query.get('client_id') ?? '',
          nonce: query.get('nonce') ?? '',
          redirectUri: back.toString(),
          challenge: query.get('code_challenge') ?? '',
        });
        back.searchParams.set('code', code);
      } else {
        back.searchParams.set('error', 'access_denied');
      }
      back.searchParams.set('state', query.get('state') ?? '');
      response.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (request.method === 'POST' && url.pathname === '/token') {
      const form = new URLSearchParams(await bodyOf(request));
      const refuse = (status: number, error: string) => {
        this.tokenCalls.push(error);
        sendJson(response, status, { error });
      };
      const basic = /^Basic (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      const [id, secret] = basic
        ? Buffer.from(basic, 'base64').toString('utf8').split(':').map(decodeURIComponent)
        : [form.get('client_id'), form.get('client_secret')];
      if (id !== CLIENT_ID || secret !== CLIENT_SECRET) return refuse(401, 'invalid_client');
      if (form.get('grant_type') !== 'authorization_code') return refuse(400, 'unsupported_grant_type');
      const code = form.get('code') ?? '';
      const grant = this.grants.get(code);
      this.grants.delete(code);
      if (!grant) return refuse(400, 'invalid_grant');
      const challenge = createHash('sha256')
        .update(form.get('code_verifier') ?? '')
        .digest('base64url');
      if (challenge !== grant.challenge || form.get('redirect_uri') !== grant.redirectUri) return refuse(400, 'invalid_grant');
      this.tokenCalls.push('ok');
      sendJson(response, 200, {
        access_token: `at-${randomBytes(8).toString('hex')}`,
        token_type: 'Bearer',
        expires_in: 300,
        id_token: this.idToken(grant),
      });
      return;
    }
    response.writeHead(404).end();
  }

  async stop(): Promise<void> {
    await closeLoopback(this.server);
  }
}

const ALICE: Person = { sub: 'idp-user-0001', username: 'alice' };

let idp: FakeIdp;
let server: TrellisServer;
let browser: Browser;
const sessions: Session[] = [];

async function visitor(): Promise<Session> {
  const session = await openSession(browser, server, { allow: [idp.url] });
  sessions.push(session);
  return session;
}

async function whoIs(session: Session): Promise<{ username: string; role: string } | null> {
  const data = await gql<{ me: { username: string; role: string } | null }>(server, '{ me { username role } }', {}, await cookieOf(session.context));
  return data.me;
}

beforeAll(async () => {
  [idp, browser] = await Promise.all([new FakeIdp().start(), launchBrowser()]);
  server = await startServer({
    TRELLIS_OIDC_ISSUER: idp.url,
    TRELLIS_OIDC_CLIENT_ID: CLIENT_ID,
    TRELLIS_OIDC_CLIENT_SECRET: CLIENT_SECRET,
    TRELLIS_OIDC_DISPLAY_NAME: DISPLAY_NAME,
  });
});

afterAll(async () => {
  for (const session of sessions) await session.context.close();
  await browser?.close();
  await server?.stop();
  await idp?.stop();
});

describe('single sign-on', () => {
  test('the login page shows the provider’s button, a plain link to the server’s start URL; axe is clean', async () => {
    const { page, foreign, problems } = await visitor();
    await page.goto('/login');
    const button = page.getByRole('link', { name: `Sign in with ${DISPLAY_NAME}` });
    await button.waitFor();
    expect(await button.getAttribute('href')).toBe(`${server.url}/auth/oidc/start`);
    // Password sign-in stays beside it.
    await page.getByLabel('Password').waitFor();
    await expectNoAxeViolations(page, 'the login page with the provider’s button');
    await screenshot(page, 'login-oidc-light');
    expect(foreign).toEqual([]);
    expect(problems).toEqual([]);
  });

  test('the button goes through the provider and lands signed in on the reader', async () => {
    idp.consent(ALICE);
    const session = await visitor();
    const { page } = session;
    await page.goto('/login');
    const authorizing = page.waitForRequest((request) => request.url().startsWith(`${idp.url}/authorize`));
    await page.getByRole('link', { name: `Sign in with ${DISPLAY_NAME}` }).click();
    const authorize = new URL((await authorizing).url()).searchParams;
    await page.waitForURL((url) => url.pathname.startsWith('/read'));
    await page.getByText('No subscriptions yet').waitFor();
    // What the server asked the provider for: the code flow with PKCE,
    // bound to this login by state and nonce.
    expect(authorize.get('response_type')).toBe('code');
    expect(authorize.get('client_id')).toBe(CLIENT_ID);
    expect(authorize.get('scope')?.split(' ')).toContain('openid');
    expect(authorize.get('code_challenge_method')).toBe('S256');
    expect(authorize.get('state')).toMatch(/\S{16,}/);
    expect(authorize.get('nonce')).toMatch(/\S{16,}/);
    expect(authorize.get('redirect_uri')).toBe(`${server.url}/auth/oidc/callback`);
    expect(idp.tokenCalls).toEqual(['ok']);
    // A new member, named from the id_token.
    expect(await whoIs(session)).toEqual({ username: ALICE.username, role: 'MEMBER' });
    expect(session.foreign).toEqual([]);
    expect(session.problems).toEqual([]);
  });

  test('a login started from another page returns there, as the same account', async () => {
    idp.consent(ALICE);
    const session = await visitor();
    const { page } = session;
    // Signed out, the gateway page sends the visitor to the login page…
    await page.goto('/gateway');
    await page.waitForURL((url) => url.pathname === '/login' && url.searchParams.get('next') === '/gateway');
    const button = page.getByRole('link', { name: `Sign in with ${DISPLAY_NAME}` });
    expect(await button.getAttribute('href')).toBe(`${server.url}/auth/oidc/start?return_to=%2Fgateway`);
    // …and the provider's round trip brings them back to it.
    await button.click();
    await page.waitForURL((url) => url.pathname === '/gateway');
    await page.getByRole('heading', { level: 1, name: 'Gateway' }).waitFor();
    expect(await whoIs(session)).toEqual({ username: ALICE.username, role: 'MEMBER' });
    expect(idp.tokenCalls).toEqual(['ok', 'ok']);
  });

  test('a declined authorization ends on a page that says so, with a way back', async () => {
    idp.decline();
    const session = await visitor();
    const { page } = session;
    await page.goto('/login');
    const callback = page.waitForResponse((response) => new URL(response.url()).pathname === '/auth/oidc/callback');
    await page.getByRole('link', { name: `Sign in with ${DISPLAY_NAME}` }).click();
    const refused = await callback;
    expect(refused.status()).toBe(400);
    expect(refused.headers()['content-type']).toContain('text/html');
    await page.getByRole('heading', { level: 1, name: 'The sign-in did not finish' }).waitFor();
    expect(await page.locator('main').textContent()).toContain('access_denied');
    // No code was traded, no session opened.
    expect(idp.tokenCalls).toEqual(['ok', 'ok']);
    expect(await whoIs(session)).toBeNull();
    await screenshot(page, 'login-oidc-declined');
    // The way back leads to the login page again.
    await page.getByRole('link', { name: 'Back to Trellis' }).click();
    await page.getByRole('link', { name: `Sign in with ${DISPLAY_NAME}` }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/login');
  });
});
