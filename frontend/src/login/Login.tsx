// Sign in: username and password; the answer sets the session cookie.
import { useSignal } from '@preact/signals';
import { useLocation } from 'preact-iso';
import { useEffect, useRef } from 'preact/hooks';
import { ApiError } from '../api/client';
import { login } from '../state/session';
import { errorText } from '../ui/states';

export function Login() {
  const { route, query } = useLocation();
  const error = useSignal<string | null>(null);
  const busy = useSignal(false);
  const user = useRef<HTMLInputElement>(null);

  useEffect(() => user.current?.focus(), []);

  async function submit(event: Event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    busy.value = true;
    error.value = null;
    try {
      await login(String(form.get('username') ?? ''), String(form.get('password') ?? ''));
      const next = query.next && query.next.startsWith('/') && !query.next.startsWith('//') ? query.next : '/read';
      route(next, true);
    } catch (caught) {
      error.value =
        caught instanceof ApiError && caught.code === 'UNAUTHENTICATED'
          ? 'Wrong username or password.'
          : errorText(caught);
    } finally {
      busy.value = false;
    }
  }

  return (
    <main class="login">
      <form onSubmit={submit} aria-describedby={error.value ? 'login-error' : undefined}>
        <h1>Sign in to Trellis</h1>
        <p class="sub">Your feeds, your node tree, your docs.</p>
        {error.value && (
          <p class="alert error" id="login-error" role="alert">
            {error.value}
          </p>
        )}
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
    </main>
  );
}
