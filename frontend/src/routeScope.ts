// Which links the client's router follows itself. preact-iso takes over
// every click on a same-origin link, so without a scope a link to one of
// the server's own pages — the identity provider's start URL
// (`/auth/oidc/start`), an OAuth callback — became a client route ("no such
// page") instead of a page load. The scope is the route table: a link to a
// client route is routed here, anything else goes to the server. Pure.

/** A pattern of `routes.json` (`/read/:scope/:id?`, `/docs/:rest*`) as a regular expression's source. */
function patternSource(path: string): string {
  if (path === '/') return '/';
  return path
    .split('/')
    .slice(1)
    .map((segment) => {
      if (segment.endsWith('*') && segment.startsWith(':')) return '(?:/[^?#]*)?';
      if (segment.startsWith(':')) return segment.endsWith('?') ? '(?:/[^/?#]+)?' : '/[^/?#]+';
      return `/${segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;
    })
    .join('');
}

/**
 * The hrefs (as written in the page: a path, with any query or fragment)
 * that name one of `paths`. Absolute URLs never match: the router leaves
 * them to the browser.
 */
export function routeScope(paths: readonly string[]): RegExp {
  return new RegExp(`^(?:${paths.map(patternSource).join('|')})(?:[?#]|$)`);
}
