// Where the login page sends people afterwards, and the identity
// provider's start link that brings them back there. Pure: tested without
// a browser.

/**
 * `next` when it is a path on this site, else null: the server's own rule
 * for `return_to` (`src/auth/oidc/rules.rs`): starts with one `/`, no
 * backslash, no control character, at most 512 bytes.
 */
export function localPath(next: string | undefined | null): string | null {
  if (!next || !next.startsWith('/') || next.startsWith('//')) return null;
  if (next.includes('\\') || /[\u0000-\u001f\u007f-\u009f]/.test(next)) return null;
  if (new TextEncoder().encode(next).length > 512) return null;
  return next;
}

/** Where to go after a password sign-in. */
export function afterLogin(next: string | undefined | null): string {
  return localPath(next) ?? '/read';
}

/**
 * The OIDC start link: `startUrl` as the server gave it, with
 * `return_to=<path>` when the visitor was sent to the login page from a
 * page of ours. The server checks `return_to` again; this only forwards it.
 */
export function oidcStartHref(startUrl: string, next: string | undefined | null): string {
  const path = localPath(next);
  if (!path || path === '/login' || path.startsWith('/login?')) return startUrl;
  const [base, hash = ''] = startUrl.split('#', 2);
  const separator = base.includes('?') ? (base.endsWith('?') || base.endsWith('&') ? '' : '&') : '?';
  return `${base}${separator}return_to=${encodeURIComponent(path)}${hash ? `#${hash}` : ''}`;
}
