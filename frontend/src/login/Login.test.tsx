// The login page against a mocked server answer: the identity provider's
// button is a plain link (with return_to), and password login can be off.
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { cleanup, render, screen, waitFor } from '@testing-library/preact';
import { LocationProvider } from 'preact-iso';

let providers: { password: boolean; oidc: { displayName: string; startUrl: string } | null } = { password: true, oidc: null };
const asked: string[] = [];

vi.mock('../api/client', async () => {
  const actual = await vi.importActual<typeof import('../api/client')>('../api/client');
  return {
    ...actual,
    query: vi.fn(async (doc: { toString(): string }) => {
      asked.push(doc.toString());
      return { authProviders: providers };
    }),
    mutate: vi.fn(async () => {
      throw new actual.ApiError('no', 'UNAUTHENTICATED');
    }),
  };
});

const { Login } = await import('./Login');

function show(path: string) {
  history.replaceState(null, '', path);
  return render(
    <LocationProvider>
      <Login />
    </LocationProvider>,
  );
}

beforeEach(() => {
  asked.length = 0;
});

afterEach(() => cleanup());

describe('Login', () => {
  test('asks the server which sign-ins it offers', async () => {
    providers = { password: true, oidc: null };
    show('/login');
    await waitFor(() => expect(asked.some((text) => text.includes('authProviders'))).toBe(true));
    expect(screen.getByLabelText('Password')).toBeTruthy();
    expect(screen.queryByRole('link', { name: /Sign in with/ })).toBeNull();
  });

  test('shows the identity provider as a link to its start URL, with the page to return to', async () => {
    providers = { password: true, oidc: { displayName: 'Acme SSO', startUrl: '/auth/oidc/start' } };
    show('/login?next=%2Fgateway');
    const link = await screen.findByRole('link', { name: 'Sign in with Acme SSO' });
    expect(link.getAttribute('href')).toBe('/auth/oidc/start?return_to=%2Fgateway');
    // Password sign-in stays beside it.
    expect(screen.getByLabelText('Password')).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeTruthy();
  });

  test('a start link without a page to return to', async () => {
    providers = { password: true, oidc: { displayName: 'Acme SSO', startUrl: '/auth/oidc/start' } };
    show('/login');
    const link = await screen.findByRole('link', { name: 'Sign in with Acme SSO' });
    expect(link.getAttribute('href')).toBe('/auth/oidc/start');
  });

  test('hides the password form when password login is off', async () => {
    providers = { password: false, oidc: { displayName: 'Acme SSO', startUrl: '/auth/oidc/start' } };
    show('/login?next=%2Fsettings');
    await screen.findByRole('link', { name: 'Sign in with Acme SSO' });
    await waitFor(() => expect(screen.queryByLabelText('Password')).toBeNull());
    expect(screen.queryByRole('button', { name: 'Sign in' })).toBeNull();
  });

  test('says so when there is no way to sign in at all', async () => {
    providers = { password: false, oidc: null };
    show('/login');
    await screen.findByText(/no way to sign in here/);
    expect(screen.queryByLabelText('Password')).toBeNull();
  });
});
