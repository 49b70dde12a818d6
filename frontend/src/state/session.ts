// Who is signed in. `me` is read once at start; login and logout change it
// and reset the subscription connection (its identity is the cookie's).
import { signal } from '@preact/signals';
import { ApiError, mutate, query, resetSubscriptions } from '../api/client';
import { LoginDocument, LogoutDocument, MeDocument, type MeQuery } from '../gql/graphql';

export type Me = NonNullable<MeQuery['me']>;

/** `undefined` while unknown, `null` when anonymous. */
export const me = signal<Me | null | undefined>(undefined);

const KNOWN = 'trellis.me';

function remember(user: Me | null): void {
  try {
    if (user) localStorage.setItem(KNOWN, JSON.stringify(user));
    else localStorage.removeItem(KNOWN);
  } catch {
    // No storage: offline start-up just asks to sign in.
  }
}

export async function loadSession(): Promise<void> {
  try {
    me.value = (await query(MeDocument, {})).me ?? null;
    remember(me.value);
  } catch (error) {
    // Offline (the app came from the service worker): stay who we were, so
    // already loaded articles can be read; the server decides once it answers.
    let known: Me | null = null;
    try {
      known = error instanceof ApiError && error.network ? (JSON.parse(localStorage.getItem(KNOWN) ?? 'null') as Me | null) : null;
    } catch {
      known = null;
    }
    me.value = known;
  }
}

export async function login(username: string, password: string): Promise<void> {
  const data = await mutate(LoginDocument, { username, password });
  resetSubscriptions();
  me.value = data.login.user;
  remember(me.value);
}

export async function logout(): Promise<void> {
  try {
    await mutate(LogoutDocument, {});
  } finally {
    resetSubscriptions();
    me.value = null;
    remember(null);
  }
}
