// Who is signed in. `me` is read once at start; login and logout change it
// and reset the subscription connection (its identity is the cookie's).
import { signal } from '@preact/signals';
import { mutate, query, resetSubscriptions } from '../api/client';
import { LoginDocument, LogoutDocument, MeDocument, type MeQuery } from '../gql/graphql';

export type Me = NonNullable<MeQuery['me']>;

/** `undefined` while unknown, `null` when anonymous. */
export const me = signal<Me | null | undefined>(undefined);

export async function loadSession(): Promise<void> {
  try {
    me.value = (await query(MeDocument, {})).me ?? null;
  } catch {
    me.value = null;
  }
}

export async function login(username: string, password: string): Promise<void> {
  const data = await mutate(LoginDocument, { username, password });
  resetSubscriptions();
  me.value = data.login.user;
}

export async function logout(): Promise<void> {
  try {
    await mutate(LogoutDocument, {});
  } finally {
    resetSubscriptions();
    me.value = null;
  }
}
