// Sign in: the identity provider's button when the server offers one (a
// plain link to its start URL: no script of the provider's runs here), and
// username and password unless the server turned password login off.
import { useSignal } from '@preact/signals';
import { useLocation } from 'preact-iso';
import { useEffect, useRef } from 'preact/hooks';
import { ApiError, query } from '../api/client';
import { AuthProvidersDocument, type AuthProvidersQuery } from '../gql/graphql';
import { login } from '../state/session';
import { errorText } from '../ui/states';
import { afterLogin, oidcStartHref } from './returnTo';

type Providers = AuthProvidersQuery['authProviders'];

export function Login() {
  const { route, query: params } = useLocation();
  const error = useSignal<string | null>(null);
  const busy = useSignal(false);
  // Unknown until the server answers: the password form shows meanwhile
  // (and stays if the question fails), so most sign-ins never wait.
  const providers = useSignal<Providers | null>(null);
  const user = useRef<HTMLInputElement>(null);

  useEffect(() => {
    user.current?.focus();
    query(AuthProvidersDocument, {})
      .then((data) => (providers.value = data.authProviders))
      .catch(() => undefined);
  }, []);

  async function submit(event: Event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    busy.value = true;
    error.value = null;
    try {
      await login(String(form.get('username') ?? ''), String(form.get('password') ?? ''));
      route(afterLogin(params.next), true);
    } catch (caught) {
      error.value =
        caught instanceof ApiError && caught.code === 'UNAUTHENTICATED'
          ? 'Wrong username or password.'
          : errorText(caught);
    } finally {
      busy.value = false;
    }
  }

  const oidc = providers.value?.oidc ?? null;
  const password = providers.value?.password ?? true;

  return (
    <main class="login">
      <div class="login-box">
        <h1>Sign in to Trellis</h1>
        <p class="sub">Your feeds, your node tree, your docs.</p>
        {error.value && (
          <p class="alert error" id="login-error" role="alert">
            {error.value}
          </p>
        )}
        {oidc && (
          <a class={`btn${password ? '' : ' primary'}`} href={oidcStartHref(oidc.startUrl, params.next)}>
            Sign in with {oidc.displayName}
          </a>
        )}
        {oidc && password && (
          <p class="or" aria-hidden="true">
            <span>or</span>
          </p>
        )}
        {password ? (
          <form onSubmit={submit} aria-describedby={error.value ? 'login-error' : undefined}>
            <div class="field">
              <label for="username">Username</label>
              <input ref={user} class="input" id="username" name="username" autocomplete="username" required />
            </div>
            <div class="field">
              <label for="password">Password</label>
              <input class="input" id="password" name="password" type="password" autocomplete="current-password" required />
            </div>
            <button class="btn primary" type="submit" disabled={busy.value}>
              {busy.value ? 'Signing in…' : 'Sign in'}
            </button>
          </form>
        ) : (
          !oidc && (
            <p class="alert info" role="status">
              This server offers no way to sign in here: password sign-in is off and no identity provider is set up. Ask its administrator.
            </p>
          )
        )}
      </div>
    </main>
  );
}
